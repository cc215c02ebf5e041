package io.clientmetrics.plugin;

import java.util.UUID;

/**
 * One push as the broker handed it to the plugin, captured on the request thread: every
 * label's value (whichever are chosen later) and a copy of the decompressed OTLP payload.
 *
 * @param pushIntervalMs the subscription's interval, or -1 where the broker does not say
 *     (the pre-4.2 interface)
 * @param clientSourcePort the client's port, or -1 when the broker did not say
 */
record Push(
        long receivedAtMs,
        UUID clientInstanceId,
        boolean terminating,
        int pushIntervalMs,
        String clientId,
        String clientSoftwareName,
        String clientSoftwareVersion,
        String clientSourceAddress,
        int clientSourcePort,
        String principal,
        int nodeId,
        String listener,
        String securityProtocol,
        byte[] payload) {

    /** The label's value: a String, or a Long for the integer labels; null when unknown. */
    Object value(Label label) {
        switch (label) {
            case CLIENT_INSTANCE_ID:
                return clientInstanceId.toString();
            case CLIENT_ID:
                return clientId;
            case CLIENT_SOFTWARE_NAME:
                return clientSoftwareName;
            case CLIENT_SOFTWARE_VERSION:
                return clientSoftwareVersion;
            case CLIENT_SOURCE_ADDRESS:
                return clientSourceAddress;
            case CLIENT_SOURCE_PORT:
                return clientSourcePort < 0 ? null : (long) clientSourcePort;
            case PRINCIPAL:
                return principal;
            case NODE_ID:
                return (long) nodeId;
            case LISTENER:
                return listener;
            case SECURITY_PROTOCOL:
                return securityProtocol;
            default:
                throw new IllegalStateException("a label without a value: " + label);
        }
    }
}
