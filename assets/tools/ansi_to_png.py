#!/usr/bin/env python3
"""Render a terminal capture (text with ANSI colour codes, as `tmux capture-pane -e -p`
prints it) to a PNG, cell by cell, so the picture is exactly what the screen showed.

usage: ansi_to_png.py CAPTURE.ans OUT.png [--cols N] [--rows N]
needs: pip install pillow fonttools; fonts-dejavu-core (Debian) for the fonts.
"""
import argparse
import re
import unicodedata

from fontTools.ttLib import TTFont
from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
FONTS = ["DejaVuSansMono.ttf", "DejaVuSans.ttf"]  # the second fills glyphs the first lacks
BOLD = ["DejaVuSansMono-Bold.ttf", "DejaVuSans-Bold.ttf"]
SIZE = 16
FG, BG = (220, 220, 220), (18, 18, 18)
BASIC = [
    (0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16),
    (36, 114, 200), (188, 63, 188), (17, 168, 205), (229, 229, 229),
    (102, 102, 102), (241, 76, 76), (35, 209, 139), (245, 245, 67),
    (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255),
]


def xterm256(n):
    if n < 16:
        return BASIC[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return (v, v, v)


class Style:
    def __init__(self):
        self.reset()

    def reset(self):
        self.fg, self.bg, self.bold, self.reverse, self.dim = None, None, False, False, False

    def apply(self, params):
        codes = [int(p) if p else 0 for p in params.split(";")] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 7:
                self.reverse = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 27:
                self.reverse = False
            elif c in (38, 48):
                if codes[i + 1] == 5:
                    colour, i = xterm256(codes[i + 2]), i + 2
                else:
                    colour, i = tuple(codes[i + 2:i + 5]), i + 4
                if c == 38:
                    self.fg = colour
                else:
                    self.bg = colour
            elif c == 39:
                self.fg = None
            elif c == 49:
                self.bg = None
            elif 30 <= c <= 37:
                self.fg = BASIC[c - 30]
            elif 40 <= c <= 47:
                self.bg = BASIC[c - 40]
            elif 90 <= c <= 97:
                self.fg = BASIC[c - 90 + 8]
            elif 100 <= c <= 107:
                self.bg = BASIC[c - 100 + 8]
            i += 1

    def colours(self):
        fg, bg = self.fg or FG, self.bg or BG
        if self.dim:
            fg = tuple(int(v * 0.6) for v in fg)
        return (bg, fg) if self.reverse else (fg, bg)


def cells(text):
    """Yield (row, col, char, width, style-snapshot) for every character."""
    style = Style()
    for row, line in enumerate(text.split("\n")):
        col = 0
        for token in re.split(r"(\x1b\[[0-9;]*m)", line):
            if token.startswith("\x1b["):
                style.apply(token[2:-1])
                continue
            for ch in token:
                width = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
                yield row, col, ch, width, (style.colours(), style.bold)
                col += width


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("out")
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=48)
    args = ap.parse_args()
    regular = [ImageFont.truetype(FONT_DIR + f, SIZE) for f in FONTS]
    bold = [ImageFont.truetype(FONT_DIR + f, SIZE) for f in BOLD]
    maps = [TTFont(FONT_DIR + f).getBestCmap() for f in FONTS]
    cell_w = round(regular[0].getlength("M"))
    ascent, descent = regular[0].getmetrics()
    cell_h = ascent + descent
    img = Image.new("RGB", (cell_w * args.cols, cell_h * args.rows), BG)
    draw = ImageDraw.Draw(img)
    with open(args.capture, encoding="utf-8") as f:
        text = f.read()
    for row, col, ch, width, ((fg, bg), is_bold) in cells(text):
        if row >= args.rows or col >= args.cols:
            continue
        x, y = col * cell_w, row * cell_h
        draw.rectangle([x, y, x + cell_w * width - 1, y + cell_h - 1], fill=bg)
        if ch == " ":
            continue
        which = next((i for i, m in enumerate(maps) if ord(ch) in m), 0)
        font = (bold if is_bold else regular)[which]
        draw.text((x, y), ch, font=font, fill=fg)
    img.save(args.out)


if __name__ == "__main__":
    main()
