//! The phases of the pipeline, one file each, in the order they run (see
//! [`super::pipeline`]). Each is a function of the [`super::exchange::Exchange`]
//! that lets the request go on or refuses it with an answer.

mod admit;
mod destination;
mod identity;
mod pace;
mod purposes;
mod robots;
mod target;

pub(crate) use admit::admit;
pub(crate) use destination::destination;
pub(crate) use identity::identity;
pub(crate) use pace::pace;
pub(crate) use purposes::purposes;
pub(crate) use robots::robots;
pub use target::repeated_segments;
pub(crate) use target::target;
