//! Text fitted to the columns it has: whole, in a shorter form said for narrow
//! screens, or cut with a `…`, never cut silently (a projector at 80 columns must not
//! show "Enter goes o").

use ratatui::layout::Rect;
use ratatui::text::Span;

/// Columns a string takes on screen.
pub fn width(s: &str) -> usize {
    Span::raw(s).width()
}

/// `text` in at most `room` columns: whole, or cut with a `…`.
pub fn cut(text: &str, room: usize) -> String {
    if width(text) <= room {
        return text.to_string();
    }
    let mut cut = String::new();
    for c in text.chars() {
        if width(&cut) + 2 > room {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// The first of `forms` (longest first) that fits in `room` columns; the last one
/// cut, where none does.
pub fn first_fitting(forms: &[&str], room: usize) -> String {
    let fits = forms.iter().find(|f| width(f) <= room);
    fits.map_or_else(|| cut(forms.last().copied().unwrap_or_default(), room), |f| f.to_string())
}

/// The columns a bordered block's title has in `area` (its corners left out).
pub fn title_room(area: Rect) -> usize {
    usize::from(area.width).saturating_sub(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_form_that_fits_is_taken_and_a_form_too_long_is_cut_with_an_ellipsis() {
        let forms = [" held for the lesson · Enter goes on ", " held · Enter goes on "];
        assert_eq!(first_fitting(&forms, 40), forms[0]);
        assert_eq!(first_fitting(&forms, 30), forms[1]);
        assert_eq!(first_fitting(&forms, 10), " held · E…");
        assert_eq!(first_fitting(&[], 10), "");
        // Wide characters count as the columns they take.
        assert_eq!(cut("世界世界", 5), "世界…");
        assert_eq!(width(&cut("世界世界", 5)), 5);
    }
}
