//! The private Redis a class runs on when the instructor names none: on loopback only
//! (students reach it through [`super::gate`]), its memory and output buffers bounded.

use crate::backend::server::{PrivateRedis, REDIS, free_port};

/// What a shared Redis the instructor names leaves open, said when the class starts:
/// fencelab's gate stands only in front of the private Redis it starts.
pub const SHARED_LEAVES_OPEN: &str = "on a Redis you name, students connect to it directly: \
     its ACL keeps each to the room's keys and commands, but not what a command costs \
     (a read of a whole long stream, a value of hundreds of MB, replies never read) nor \
     whose lock value a program claims, and \
     the room stays on it if you and your janitor are both killed (until the next class \
     or `fencelab doctor`); without --redis, fencelab starts a private Redis that bounds \
     all of this and ends with the class";

/// Memory a private class Redis may use: a base for the room and the instructor's
/// log, and each student's bound on what they may write ([`gate::STUDENT_BYTES`]).
///
/// [`gate::STUDENT_BYTES`]: super::gate::STUDENT_BYTES
fn class_memory(students: usize) -> usize {
    64 * 1024 * 1024 + students * super::gate::STUDENT_BYTES
}

/// A private redis-server for a class of `students`, on loopback only, with a
/// generated password (never shown: students get users of their own), bounded memory
/// (writes refused past it, nothing evicted) and bounded output buffers (a client that
/// never reads its replies is cut off): the server, its admin URL, and its unix socket,
/// the gate's way in (cheaper than loopback TCP on the hop every student's command and
/// reply cross: `fencelab bench class` at 1,000 students measures it).
pub fn private_redis(
    students: usize,
) -> anyhow::Result<(PrivateRedis, String, std::path::PathBuf)> {
    let port = free_port(REDIS)?;
    let password = super::new_room_id()?
        + &super::new_room_id()?
        + &super::new_room_id()?
        + &super::new_room_id()?;
    let (port_arg, memory) = (port.to_string(), class_memory(students).to_string());
    let extra = [
        "--port",
        &port_arg,
        "--bind",
        "127.0.0.1",
        "--requirepass",
        &password,
        "--maxmemory",
        &memory,
        "--maxmemory-policy",
        "noeviction",
        "--client-output-buffer-limit",
        "normal 32mb 8mb 10",
    ];
    let server = PrivateRedis::start_with(&extra)?;
    let socket = server.socket().to_path_buf();
    Ok((server, format!("redis://:{password}@127.0.0.1:{port}"), socket))
}
