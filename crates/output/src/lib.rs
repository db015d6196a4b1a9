//! Output handling that needs no I/O: the bounded raw [`HeadTail`] buffer, the
//! streaming [`Sanitizer`] that turns raw bytes into text for a model, and the
//! renderers for a run's output body and result text.
//!
//! Raw bytes are the truth (the artifact file is byte-exact); text for a model
//! is a rendering of them.
//!
//! ```
//! use shellvisor_output::Sanitizer;
//!
//! let mut sanitizer = Sanitizer::new(768);
//! let mut text = sanitizer.push(b"\x1b[31mred\x1b[0m\n50%\r100%\n");
//! text.push_str(&sanitizer.finish());
//! assert_eq!(text, "red\n100%\n");
//! ```
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod head_tail;
mod render;
mod sanitize;

pub use head_tail::HeadTail;
pub use render::RenderedOutput;
pub use render::ResultTextParts;
pub use render::Stopped;
pub use render::awaiting_input_text;
pub use render::background_text;
pub use render::idle_notice;
pub use render::render_output;
pub use render::result_text;
pub use render::timeout_notice;
pub use sanitize::Sanitizer;
pub use sanitize::sanitize;
