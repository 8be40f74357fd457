//! An OTLP/gRPC request's bytes as ingest's server reads them, without the service around
//! it: tonic's framing (the 5-byte message prefix, gzip, the size limit) configured as the
//! Export services configure it, a codec that hands the message over as its bytes, and the
//! codes OTLP clients read right. The daemon's services (`daemon/ingest/grpc.rs`) and the
//! `otlp_grpc_request` fuzz target share these, so what is fuzzed is what is served.

use std::marker::PhantomData;

use prost::bytes::{Buf, Bytes};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder};
use tonic::{Code, Status};

/// A unary Export server over `T` responses: gzip accepted, nothing compressed back,
/// messages over `limit` bytes (after decompression) refused.
pub fn server<T: prost::Message + Send + 'static>(limit: usize) -> tonic::server::Grpc<RawCodec<T>> {
    let mut accept = EnabledCompressionEncodings::default();
    accept.enable(CompressionEncoding::Gzip);
    tonic::server::Grpc::new(RawCodec(PhantomData))
        .apply_compression_config(accept, EnabledCompressionEncodings::default())
        .apply_max_message_size_config(Some(limit), None)
}

/// The code a client is answered with. Tonic answers a message over the size limit with
/// OUT_OF_RANGE, which OTLP exporters retry (forever, for the same message), and one it
/// cannot decode with INTERNAL; both are the client's data: INVALID_ARGUMENT, which is not
/// retried. Ingest's own answers never use either code.
pub fn input_code(code: Code) -> Code {
    match code {
        Code::OutOfRange | Code::Internal => Code::InvalidArgument,
        code => code,
    }
}

/// Reads a message as its bytes; writes a response with prost.
pub struct RawCodec<T>(PhantomData<fn(T)>);

impl<T: prost::Message + Send + 'static> Codec for RawCodec<T> {
    type Encode = T;
    type Decode = Bytes;
    type Encoder = RawCodec<T>;
    type Decoder = RawCodec<T>;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec(PhantomData)
    }
}

impl<T: prost::Message> Encoder for RawCodec<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(buf).map_err(|e| Status::internal(e.to_string()))
    }
}

impl<T: Send + 'static> Decoder for RawCodec<T> {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(buf.copy_to_bytes(buf.remaining())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tonic_s_input_codes_become_invalid_argument() {
        assert_eq!(input_code(Code::OutOfRange), Code::InvalidArgument);
        assert_eq!(input_code(Code::Internal), Code::InvalidArgument);
        for kept in [Code::Ok, Code::Unimplemented, Code::ResourceExhausted, Code::Unavailable, Code::Unauthenticated] {
            assert_eq!(input_code(kept), kept);
        }
    }
}
