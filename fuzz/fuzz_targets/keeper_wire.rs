//! The keeper's link messages: any bytes, with any count of descriptors said to be
//! attached, are refused or accepted — never a panic — and what is accepted encodes back
//! to the same bytes and names exactly as many descriptors as came with it.
#![no_main]

use genward::keeper::wire::{Kind, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&fds, bytes)) = data.split_first() else {
        return;
    };
    let fds = usize::from(fds % 10);
    if let Ok(m) = Message::decode(bytes, fds) {
        assert_eq!(&m.encode()[..], bytes);
        let expected = match m.kind {
            Kind::Hold => m.roles.len(),
            _ => 0,
        };
        assert_eq!(fds, expected);
    }
});
