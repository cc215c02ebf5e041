package io.clientmetrics.plugin;

import java.net.InetAddress;
import org.apache.kafka.common.network.ClientInformation;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a push's request context says beyond the public {@link AuthorizableRequestContext}: the
 * client's software name and version (KIP-511) and its source port. Kafka hands plugins its
 * {@link RequestContext}, whose public fields carry them (3.7 to 4.4 alike); should a later
 * Kafka stop doing so, these labels read {@code unknown} / are left out and the plugin keeps
 * working.
 */
final class RequestDetails {
    private static final Logger LOG = LoggerFactory.getLogger(RequestDetails.class);
    static final String UNKNOWN = "unknown";
    private static volatile boolean available = true;

    final String softwareName;
    final String softwareVersion;
    final int port;

    private RequestDetails(String softwareName, String softwareVersion, int port) {
        this.softwareName = softwareName;
        this.softwareVersion = softwareVersion;
        this.port = port;
    }

    static RequestDetails of(AuthorizableRequestContext context) {
        if (available && context instanceof RequestContext) {
            try {
                RequestContext request = (RequestContext) context;
                ClientInformation info = request.clientInformation;
                Integer port = request.clientPort == null ? null : request.clientPort.orElse(null);
                return new RequestDetails(
                        info == null ? UNKNOWN : info.softwareName(),
                        info == null ? UNKNOWN : info.softwareVersion(),
                        port == null ? -1 : port);
            } catch (LinkageError e) {
                available = false;
                LOG.warn("clientmetrics: this broker's request context has no client software "
                        + "name, version or port; those labels are left unknown", e);
            }
        }
        return new RequestDetails(UNKNOWN, UNKNOWN, -1);
    }

    static String address(AuthorizableRequestContext context) {
        InetAddress address = context.clientAddress();
        return address == null ? "" : address.getHostAddress();
    }
}
