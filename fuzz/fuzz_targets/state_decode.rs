//! Arbitrary bytes into every decoder of the state directory's files: nothing may panic,
//! and whatever a decoder accepts must survive its encoder: encode → decode gives the same
//! value (so a file the daemon reads back is one it can write again, unchanged). The
//! output journal's records (after an 8-byte nonce): whatever is taken is a valid
//! session's frame no larger than a record may hold, inside the bytes read.
#![no_main]

use genward::store::descriptor::{decode_descriptor, encode_descriptor};
use genward::store::dir_id::{decode_id, encode_id, parse_gen_marker};
use genward::store::format::{check_header, Kind};
use genward::store::highwater::{decode_ceiling, encode_ceiling};
use genward::store::journal::MAX_FRAME;
use genward::store::journal_read::{read_records, Found};
use genward::store::lease::{decode_holder, encode_holder};
use genward::store::names::{gen_of_file, session_of_file};
use genward::store::session_codec::{decode_session, encode_session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for kind in [
        Kind::Id,
        Kind::HighWater,
        Kind::Lease,
        Kind::Session,
        Kind::Descriptor,
        Kind::Output,
        Kind::Keeper,
    ] {
        let _ = check_header(data, kind);
    }
    if let Some((nonce, body)) = data.split_first_chunk::<8>() {
        let _ = read_records(body, 1, u64::from_le_bytes(*nonce), |session, found| {
            assert!(genward::core::is_valid_session_name(session));
            if let Found::Record(record) = found {
                assert!(record.len <= MAX_FRAME);
                assert!(record.start + record.len <= body.len());
                assert_eq!(record.seg, 1);
            }
        });
    }
    if let Ok(record) = decode_session(data) {
        let bytes = encode_session(&record).expect("a decoded session encodes");
        assert_eq!(decode_session(&bytes).as_ref(), Ok(&record));
    }
    if let Ok(d) = decode_descriptor(data) {
        assert_eq!(decode_descriptor(&encode_descriptor(&d)).as_ref(), Ok(&d));
    }
    if let Ok(ceiling) = decode_ceiling(data) {
        assert_eq!(decode_ceiling(&encode_ceiling(ceiling)), Ok(ceiling));
    }
    if let Ok((id, at)) = decode_id(data) {
        assert_eq!(decode_id(&encode_id(&id, at)), Ok((id, at)));
    }
    if let Ok(holder) = decode_holder(data) {
        assert_eq!(decode_holder(&encode_holder(&holder)).as_ref(), Ok(&holder));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some((id, gen)) = parse_gen_marker(text) {
            assert_eq!(genward::store::dir_id::gen_marker(&id, gen), text);
        }
        if let Some(name) = session_of_file(text) {
            assert_eq!(genward::store::names::session_file(name), text);
        }
        if let Some(gen) = gen_of_file(text) {
            assert_eq!(genward::store::names::gen_file(gen), text);
        }
    }
});
