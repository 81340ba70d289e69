//! The service layer: what the TUI's screens run, between them and the domain. A
//! screen says what it wants and hears typed news back; the deployments, the runs on
//! them, the class's room and the questions put to a class are handled here, so the
//! TUI names neither `backend` nor `class` (tests/suite/architecture.rs holds it to
//! that). The types handed to the TUI are this layer's own.
//!
//! - [`playground`]: the servers the command line names, what a deployment is.
//! - [`runner`]: the playground's runs on a deployment it owns (real or simulated).
//! - [`class`]: the instructor's room and run, a student's attendance.
//! - [`quiz`]: a lesson's questions posed to a class, answered, counted, revealed.
//! - [`search`]: `b`'s search of the run on screen, on a thread of its own.

pub mod class;
pub mod playground;
pub mod quiz;
pub mod runner;
pub mod search;
