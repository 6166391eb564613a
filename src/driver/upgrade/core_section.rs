//! The core's section of an upgrade image: the core's whole state
//! ([`Core::export_image`]) in the store's strict JSON encoding of it.

use crate::core::{Config, Core};
use crate::store::core_image::{decode_core_image, encode_core_image};
use crate::store::image::ImageError;

/// The core's state as the image's `core` section; `Err` says why it cannot be written
/// (the upgrade is then refused).
pub fn export(core: &Core) -> Result<Vec<u8>, String> {
    let image = core
        .export_image()
        .map_err(|e| format!("the core's state: {}", e.message()))?;
    encode_core_image(&image).map_err(|e| format!("the core's state: {e}"))
}

/// The core of an image's `core` section, checked whole, under `config`.
pub fn import(bytes: &[u8], config: Config) -> Result<Core, ImageError> {
    let image = decode_core_image(bytes).map_err(|e| ImageError(format!("core: {e}")))?;
    Core::import_image(config, image).map_err(|e| ImageError(format!("core: {}", e.message())))
}
