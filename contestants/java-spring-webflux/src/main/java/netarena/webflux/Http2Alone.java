package netarena.webflux;

import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import netarena.shared.ServedProtocol;
import org.springframework.boot.reactor.netty.NettyReactiveWebServerFactory;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.boot.web.server.WebServerFactoryCustomizer;
import org.springframework.boot.web.server.WebServerSslBundle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.netty.http.Http2SslContextSpec;
import reactor.netty.http.HttpProtocol;

/**
 * An h2 start serves HTTP/2 alone. Boot's server.http2.enabled (ServedProtocol) makes Reactor Netty serve HTTP/1.1
 * beside h2, its Http2SslContextSpec offering h2 and http/1.1 by ALPN; this narrows both: HttpProtocol.H2 alone,
 * and an Http2SslContextSpec of the same key material (Boot's bundle from its PEM properties, the way Boot's own
 * SslServerCustomizer reads it) whose ALPN offers h2 alone, as java-netty's does. An h2c start keeps Boot's own
 * set-up, HTTP/1.1 and h2c on one port (Reactor Netty tells the prior-knowledge preface apart by its first bytes).
 */
@Configuration(proxyBeanMethods = false)
class Http2Alone {
    private static final ApplicationProtocolConfig H2_ONLY = new ApplicationProtocolConfig(
            ApplicationProtocolConfig.Protocol.ALPN,
            ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
            ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT,
            ApplicationProtocolNames.HTTP_2);

    // Unordered, so it runs after Boot's own factory customizer, which gives the factory its Ssl and bundles.
    @Bean
    WebServerFactoryCustomizer<NettyReactiveWebServerFactory> http2AloneOverTls() {
        return factory -> {
            if (!ServedProtocol.name().equals("h2")) {
                return;
            }
            SslBundle bundle = WebServerSslBundle.get(factory.getSsl(), factory.getSslBundles());
            Http2SslContextSpec h2Only = Http2SslContextSpec.forServer(bundle.getManagers().getKeyManagerFactory())
                    .configure(builder -> builder.applicationProtocolConfig(H2_ONLY));
            factory.addServerCustomizers(server -> server
                    .protocol(HttpProtocol.H2)
                    .secure(spec -> spec.sslContext(h2Only)));
        };
    }
}
