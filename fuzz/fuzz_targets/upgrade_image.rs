//! Arbitrary bytes as an upgrade image, the way a resuming program reads one: the
//! envelope, the driver's section and the core's section (decoded, then imported into a
//! core). Nothing may panic; whatever the driver's decoder accepts must survive its
//! encoder unchanged.
#![no_main]

use genward::core::{Config, Core};
use genward::driver::upgrade::state::DriverImage;
use genward::store::core_image::decode_core_image;
use genward::store::image::Image;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let sections: Vec<&[u8]> = match Image::parse(data) {
        Ok(image) => [image.section("driver"), image.section("core")]
            .into_iter()
            .flatten()
            .collect(),
        // Not an image: try the bytes as each section's body.
        Err(_) => vec![data, data],
    };
    for body in sections {
        if let Ok(driver) = DriverImage::decode(body) {
            let again = DriverImage::decode(&driver.encode()).expect("re-decodes");
            assert_eq!(again, driver);
        }
        if let Ok(core) = decode_core_image(body) {
            let _ = Core::import_image(Config::default(), core);
        }
    }
});
