//! Redis commands as a client sends them (RESP arrays of bulk strings), read whole
//! and bounded before anything acts on them: the class gate vets each, a program's
//! proxy reads the first for its password.

/// `args` as a client sends them: a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).into_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A command's arguments, its name first.
pub type Command = Vec<Vec<u8>>;

/// The next whole command at the start of `bytes` (a RESP array of bulk strings), and
/// the bytes it takes; None until it is all there. A command of more than `max_args`
/// arguments, or one over `max_arg_bytes`, is an error as soon as its header says
/// so, before its bytes are read.
pub fn next_command(
    bytes: &[u8],
    max_args: usize,
    max_arg_bytes: usize,
) -> Result<Option<(Command, usize)>, String> {
    let Some((count, mut at)) = header(bytes, b'*')? else { return Ok(None) };
    if count > max_args as i64 || count < 1 {
        return Err(format!("a command of {count} arguments (at most {max_args})"));
    }
    let mut args = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let Some((length, from)) = header(&bytes[at..], b'$')? else { return Ok(None) };
        if length < 0 || length > max_arg_bytes as i64 {
            return Err(format!("an argument of {length} bytes (at most {max_arg_bytes})"));
        }
        let start = at + from;
        let end = start + length as usize;
        if bytes.len() < end + 2 {
            return Ok(None);
        }
        args.push(bytes[start..end].to_vec());
        at = end + 2;
    }
    Ok(Some((args, at)))
}

/// A `<kind><number>\r\n` header at the start of `bytes`: the number and the bytes it
/// took; None until its line is whole.
fn header(bytes: &[u8], kind: u8) -> Result<Option<(i64, usize)>, String> {
    let Some(&first) = bytes.first() else { return Ok(None) };
    if first != kind {
        return Err("commands are RESP arrays of bulk strings (no inline commands)".into());
    }
    let Some(end) = bytes.windows(2).take(24).position(|w| w == b"\r\n") else {
        return if bytes.len() > 24 { Err("a header too long".into()) } else { Ok(None) };
    };
    let n = std::str::from_utf8(&bytes[1..end]).ok().and_then(|n| n.parse().ok());
    n.map(|n| Some((n, end + 2))).ok_or_else(|| "a header that is no number".into())
}
