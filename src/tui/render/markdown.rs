//! Narration Markdown drawn as terminal lines: paragraphs wrapped to the panel,
//! code blocks kept as written (indented, behind a `│` gutter, never wrapped), lists
//! with a hanging indent, *emphasis* in italics, **strong** in bold, `code` styled.
//!
//! A step's body is parsed once into a [`Doc`] (when the step's run starts); each frame
//! only wraps it to the panel's width with the current theme, which is cheap.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::super::theme::Theme;

/// How a piece of text looks, whatever the theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Look {
    emphasis: bool,
    strong: bool,
    code: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Inline {
    Text(String, Look),
    /// A hard line break (two spaces or a backslash at the end of a line).
    Break,
}

#[derive(Debug, Clone, PartialEq)]
enum Block {
    /// Wrapped text; `marker` ("• ", "2. ") hangs before its first line.
    Text { indent: usize, marker: String, inlines: Vec<Inline>, heading: bool },
    /// A code block, line by line, as written.
    Code { indent: usize, lines: Vec<String> },
}

/// A parsed Markdown text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Doc {
    /// Each block, with whether a blank line goes before it.
    blocks: Vec<(bool, Block)>,
}

/// The list being read: its next number (None: bullets).
struct List {
    next: Option<u64>,
}

/// Parsing state: the block being built, where it sits, and the inline styles open.
#[derive(Default)]
struct Builder {
    doc: Doc,
    lists: Vec<List>,
    inlines: Vec<Inline>,
    look: Look,
    /// Marker of the list item whose first text has not been placed yet.
    marker: Option<String>,
    heading: bool,
    code: Option<String>,
    /// The last block placed was inside a list (list items follow without a gap).
    last_in_list: bool,
    quote_depth: usize,
}

impl Builder {
    /// Columns every line of a block at this depth is indented by.
    fn indent(&self) -> usize {
        let items: usize = self.lists.len().saturating_sub(1) * 3;
        let pending = if self.marker.is_none() && !self.lists.is_empty() { 3 } else { 0 };
        items + pending + self.quote_depth * 2
    }

    fn place(&mut self, block: Block) {
        let in_list = !self.lists.is_empty();
        let follows_item = in_list && self.last_in_list;
        let gap = !(self.doc.blocks.is_empty() || follows_item);
        self.doc.blocks.push((gap, block));
        self.last_in_list = in_list;
    }

    /// Place the text collected so far, if any.
    fn flush(&mut self) {
        if self.inlines.is_empty() {
            return;
        }
        let inlines = std::mem::take(&mut self.inlines);
        let indent = self.indent();
        let marker = self.marker.take().unwrap_or_default();
        let heading = self.heading;
        self.place(Block::Text { indent, marker, inlines, heading });
    }

    fn text(&mut self, text: &str) {
        if let Some(code) = self.code.as_mut() {
            code.push_str(text);
        } else {
            self.inlines.push(Inline::Text(text.to_string(), self.look));
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                let look = Look { code: true, ..self.look };
                self.inlines.push(Inline::Text(t.to_string(), look));
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.inlines.push(Inline::Break),
            Event::Html(t) | Event::InlineHtml(t) => self.text(t.trim_end()),
            Event::Rule => {
                self.flush();
                self.inlines.push(Inline::Text("───".into(), Look::default()));
                self.flush();
            }
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Paragraph => self.flush(),
            Tag::Heading { .. } => {
                self.flush();
                self.heading = true;
            }
            Tag::CodeBlock(_) => {
                self.flush();
                self.code = Some(String::new());
            }
            Tag::List(start) => {
                self.flush();
                self.lists.push(List { next: start });
            }
            Tag::Item => {
                self.flush();
                let marker = match self.lists.last_mut().and_then(|l| l.next.as_mut()) {
                    Some(n) => {
                        *n += 1;
                        format!("{}. ", *n - 1)
                    }
                    None => "• ".to_string(),
                };
                self.marker = Some(marker);
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.quote_depth += 1;
            }
            Tag::Emphasis => self.look.emphasis = true,
            Tag::Strong => self.look.strong = true,
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::Item => self.flush(),
            TagEnd::Heading(_) => {
                self.flush();
                self.heading = false;
            }
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                let lines = code.trim_end_matches('\n').lines().map(str::to_string).collect();
                let indent = self.indent();
                self.place(Block::Code { indent, lines });
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                // The next block after a whole list gets its blank line.
                self.last_in_list &= !self.lists.is_empty();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote_depth = self.quote_depth.saturating_sub(1);
            }
            TagEnd::Emphasis => self.look.emphasis = false,
            TagEnd::Strong => self.look.strong = false,
            _ => {}
        }
    }
}

impl Doc {
    pub fn parse(src: &str) -> Doc {
        let mut builder = Builder::default();
        for event in Parser::new(src) {
            builder.event(event);
        }
        builder.flush();
        builder.doc
    }

    /// The text as lines at most `width` columns wide (code blocks excepted: they are
    /// cut by the panel, not wrapped). `dim` draws it as an earlier, already read step.
    pub fn lines(&self, width: usize, theme: &Theme, dim: bool) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        let styles = Styles::new(theme, dim);
        for (gap, block) in &self.blocks {
            if *gap {
                out.push(Line::raw(""));
            }
            match block {
                Block::Text { indent, marker, inlines, heading } => {
                    let look = |l: Look| if *heading { Look { strong: true, ..l } } else { l };
                    let words = words(inlines, look);
                    let hang = indent + marker.width();
                    wrap(&mut out, &words, width, (*indent, marker, hang), &styles);
                }
                Block::Code { indent, lines } => {
                    for line in lines {
                        out.push(Line::from(vec![
                            Span::raw(" ".repeat(indent + 2)),
                            Span::styled("│ ", styles.code),
                            Span::styled(line.clone(), styles.code),
                        ]));
                    }
                }
            }
        }
        out
    }
}

/// Plain text wrapped to `width` after `lead` ("? ", "✔ "), every line in `style`,
/// the lines after the first hanging under the text.
pub fn wrapped(lead: &str, text: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    wrapped_after((lead, style), text, width, style)
}

/// [`wrapped`], its `lead` in a style of its own (the help's key beside what it does).
pub fn wrapped_after(
    (lead, lead_style): (&str, Style),
    text: &str,
    width: usize,
    style: Style,
) -> Vec<Line<'static>> {
    let words: Vec<Word> = text
        .split_whitespace()
        .map(|w| Word::Text(vec![(w.to_string(), Look::default())]))
        .collect();
    let styles = Styles { plain: style, code: style, dim: None, lead: Some(lead_style) };
    let mut out = Vec::new();
    wrap(&mut out, &words, width, (0, lead, lead.width()), &styles);
    out
}

struct Styles {
    plain: Style,
    code: Style,
    /// Earlier steps: their colour gives way to the dim style, their emphasis stays.
    dim: Option<Style>,
    /// A line's marker, when not in the text's plain style.
    lead: Option<Style>,
}

impl Styles {
    fn new(theme: &Theme, dim: bool) -> Self {
        // Code borrows the backend label's calm colour, which no state of a run uses.
        let code = theme.base.patch(theme.backend);
        let dim = dim.then_some(theme.dim);
        Styles { plain: theme.base, code: dim.map_or(code, |d| code.patch(d)), dim, lead: None }
    }

    fn of(&self, look: Look) -> Style {
        let mut style = if look.code { self.code } else { self.plain };
        if look.emphasis {
            style = style.add_modifier(Modifier::ITALIC);
        }
        if look.strong {
            style = style.add_modifier(Modifier::BOLD);
        }
        match self.dim {
            Some(dim) if !look.code => style.patch(dim),
            _ => style,
        }
    }
}

/// A word: pieces of text with their looks (`**token 2**,` is two pieces), or a
/// forced line break.
enum Word {
    Text(Vec<(String, Look)>),
    Break,
}

impl Word {
    fn width(&self) -> usize {
        match self {
            Word::Text(pieces) => pieces.iter().map(|(t, _)| t.width()).sum(),
            Word::Break => 0,
        }
    }
}

fn words(inlines: &[Inline], look: impl Fn(Look) -> Look) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current: Vec<(String, Look)> = Vec::new();
    for inline in inlines {
        let (text, l) = match inline {
            Inline::Text(text, l) => (text, look(*l)),
            Inline::Break => {
                if !current.is_empty() {
                    words.push(Word::Text(std::mem::take(&mut current)));
                }
                words.push(Word::Break);
                continue;
            }
        };
        let mut piece = String::new();
        for c in text.chars() {
            if c.is_whitespace() {
                if !piece.is_empty() {
                    current.push((std::mem::take(&mut piece), l));
                }
                if !current.is_empty() {
                    words.push(Word::Text(std::mem::take(&mut current)));
                }
            } else {
                piece.push(c);
            }
        }
        if !piece.is_empty() {
            current.push((piece, l));
        }
    }
    if !current.is_empty() {
        words.push(Word::Text(current));
    }
    words
}

/// Greedy wrapping: `indent` spaces and the `marker` before the first line, `hang`
/// spaces before the lines after. A word wider than the room is cut.
fn wrap(
    out: &mut Vec<Line<'static>>,
    words: &[Word],
    width: usize,
    (indent, marker, hang): (usize, &str, usize),
    styles: &Styles,
) {
    let lead = |first: bool| -> (Vec<Span<'static>>, usize) {
        if !first {
            return (vec![Span::raw(" ".repeat(hang))], width.saturating_sub(hang).max(1));
        }
        let mut spans = vec![Span::raw(" ".repeat(indent))];
        if !marker.is_empty() {
            let style = styles.lead.unwrap_or_else(|| styles.of(Look::default()));
            spans.push(Span::styled(marker.to_string(), style));
        }
        (spans, width.saturating_sub(indent + marker.width()).max(1))
    };
    let (mut spans, mut room) = lead(true);
    let mut used = 0;
    let mut placed_any = false;
    let mut new_line = |spans: &mut Vec<Span<'static>>, room: &mut usize, used: &mut usize| {
        out.push(Line::from(std::mem::take(spans)));
        (*spans, *room) = lead(false);
        *used = 0;
    };
    for word in words {
        let Word::Text(pieces) = word else {
            new_line(&mut spans, &mut room, &mut used);
            continue;
        };
        placed_any = true;
        if used > 0 && used + 1 + word.width() > room {
            new_line(&mut spans, &mut room, &mut used);
        }
        if used > 0 {
            spans.push(Span::styled(" ", styles.of(Look::default())));
            used += 1;
        }
        for (text, look) in pieces {
            let style = styles.of(*look);
            let mut part = String::new();
            for c in text.chars() {
                let cw = c.width().unwrap_or(0);
                if used + cw > room && used > 0 {
                    if !part.is_empty() {
                        spans.push(Span::styled(std::mem::take(&mut part), style));
                    }
                    new_line(&mut spans, &mut room, &mut used);
                }
                part.push(c);
                used += cw;
            }
            if !part.is_empty() {
                spans.push(Span::styled(part, style));
            }
        }
    }
    if used > 0 || !placed_any {
        out.push(Line::from(spans));
    }
}

#[cfg(test)]
mod tests {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::widgets::{Paragraph, Widget};

    use super::*;

    /// Draw `md` `width` columns wide into a buffer, as the lesson panel does.
    fn draw(md: &str, width: u16) -> Buffer {
        let lines = Doc::parse(md).lines(width as usize, &Theme::DEFAULT, false);
        let mut buf = Buffer::empty(Rect::new(0, 0, width, lines.len() as u16));
        Paragraph::new(lines).render(buf.area, &mut buf);
        buf
    }

    fn rows(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    .trim_end()
                    .into()
            })
            .collect()
    }

    fn cell_of(buf: &Buffer, needle: &str) -> (u16, u16) {
        for (y, row) in rows(buf).iter().enumerate() {
            if let Some(byte) = row.find(needle) {
                return (row[..byte].chars().count() as u16, y as u16);
            }
        }
        panic!("{needle:?} not drawn: {:#?}", rows(buf));
    }

    #[test]
    fn paragraphs_wrap_to_the_width_and_are_kept_apart() {
        let buf = draw("one two three four five six\nseven.\n\nNext paragraph.", 14);
        assert_eq!(
            rows(&buf),
            ["one two three", "four five six", "seven.", "", "Next", "paragraph."]
        );
    }

    #[test]
    fn code_blocks_stay_as_written_indented_and_styled() {
        let md = "Run this:\n\n```sql\nSELECT id FROM jobs WHERE state = 'queued';\n  FOR UPDATE;\n```\nAfter.";
        let buf = draw(md, 30);
        let rows = rows(&buf);
        assert_eq!(rows[0], "Run this:");
        assert_eq!(rows[2], "  │ SELECT id FROM jobs WHERE", "cut, not wrapped");
        assert_eq!(rows[3], "  │   FOR UPDATE;", "its own indentation kept");
        assert_eq!(rows[5], "After.");
        let code = cell_of(&buf, "SELECT");
        assert_eq!(buf[code].fg, Theme::DEFAULT.backend.fg.unwrap());
        assert_ne!(buf[cell_of(&buf, "After")].fg, buf[code].fg);
    }

    #[test]
    fn list_items_hang_under_their_marker() {
        let buf =
            draw("Steps:\n\n- first item wraps here\n- second\n\n1. one\n2. two words here", 16);
        assert_eq!(
            rows(&buf),
            [
                "Steps:",
                "",
                "• first item",
                "  wraps here",
                "• second",
                "",
                "1. one",
                "2. two words",
                "   here"
            ]
        );
    }

    #[test]
    fn emphasis_is_italic_strong_is_bold_and_no_marks_show() {
        let buf = draw("An *emphasised* and a **strong** word, and `code`.", 60);
        let text = rows(&buf).join("\n");
        assert_eq!(text, "An emphasised and a strong word, and code.");
        assert!(buf[cell_of(&buf, "emphasised")].modifier.contains(Modifier::ITALIC));
        assert!(buf[cell_of(&buf, "strong")].modifier.contains(Modifier::BOLD));
        assert!(!buf[cell_of(&buf, "An")].modifier.contains(Modifier::BOLD));
        assert_eq!(buf[cell_of(&buf, "code")].fg, Theme::DEFAULT.backend.fg.unwrap());
    }

    #[test]
    fn a_word_longer_than_the_line_is_cut_not_lost() {
        let buf = draw("abcdefghij", 4);
        assert_eq!(rows(&buf), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn plain_text_wraps_with_a_hanging_indent() {
        let lines = wrapped("✔ ", "1) one two three", 10, Style::default());
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        assert_eq!(text, ["✔ 1) one", "  two", "  three"]);
    }
}
