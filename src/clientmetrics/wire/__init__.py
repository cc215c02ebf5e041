"""clientmetrics.wire: Kafka framing, headers v0-v3 and message codecs, without I/O.

The sans-IO server connection both gateway modes drive is ``wire.server``; the
SASL mechanisms it drives implement ``wire.mechanism`` (both imported by name,
not re-exported here).

Built on kio 0.6.5; the rest of the package depends on this module, never on kio
directly. kio's quirks (zero UUIDs read as ``None``, unknown tagged fields and
error codes rejected) are normalised in ``wire.codec``.
"""

from clientmetrics.wire.api import AlterOp, ApiKey, ConfigResourceType
from clientmetrics.wire.codec import ZERO_UUID
from clientmetrics.wire.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedApi
from clientmetrics.wire.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_frame
from clientmetrics.wire.headers import (
    HEADER_V3_FROM,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_request,
    request_header_version,
    response_header_version,
)
from clientmetrics.wire.kip1313 import (
    GetTelemetrySubscriptionsRequestV1,
    GetTelemetrySubscriptionsResponseV1,
    PushTelemetryRequestV1,
    PushTelemetryResponseV1,
)
from clientmetrics.wire.messages import (
    decode_body,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from clientmetrics.wire.replies import blank_entity, error_response
from clientmetrics.wire.schemas import SERVED, request_type, response_type

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "HEADER_V3_FROM",
    "SERVED",
    "ZERO_UUID",
    "AlterOp",
    "ApiKey",
    "ConfigResourceType",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLarge",
    "GetTelemetrySubscriptionsRequestV1",
    "GetTelemetrySubscriptionsResponseV1",
    "ProtocolError",
    "PushTelemetryRequestV1",
    "PushTelemetryResponseV1",
    "RequestHeader",
    "UnsupportedApi",
    "blank_entity",
    "decode_body",
    "decode_request",
    "decode_response",
    "encode_frame",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "error_response",
    "parse_request_header",
    "parse_response_header",
    "peek_request",
    "request_header_version",
    "request_type",
    "response_header_version",
    "response_type",
]
