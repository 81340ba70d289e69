//! Text from scenario files, saved logs and servers is shown, never obeyed: control
//! characters (ESC, BEL, ...) become visible escapes like `\x1b` before they reach a
//! terminal or a file. Newlines and tabs stay as they are; nothing else changes.

use std::borrow::Cow;

/// `text` with every control character except `\n` and `\t` written as `\xNN` (C0 and
/// DEL) or `\u{NN}` (C1). Text without such characters comes back unchanged.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

fn is_hidden(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn controls_become_visible_and_plain_text_is_untouched() {
        assert_eq!(printable("T\u{1b}[2J\u{7}x"), "T\\x1b[2J\\x07x");
        assert_eq!(printable("a\rb\u{7f}\u{9b}"), "a\\x0db\\x7f\\u{9b}");
        assert_eq!(printable("3. The GC pause\n\tnext – ok"), "3. The GC pause\n\tnext – ok");
    }
}
