# The server side of netarena's h1-tls for the Ruby contestants (ruby-puma, ruby-eventmachine): netarena starts a
# server for an h1-tls level with NETARENA_TLS_CERT and NETARENA_TLS_KEY naming the run's PEM certificate and key,
# and for every other level without them, so a server serves HTTPS exactly when they are set.
module NetarenaTLS
  # [certificate file, key file] for an h1-tls start, nil for a cleartext one.
  def self.files
    cert = ENV.fetch("NETARENA_TLS_CERT", "")
    return nil if cert.empty?

    key = ENV.fetch("NETARENA_TLS_KEY", "")
    abort "error: NETARENA_TLS_CERT is set but NETARENA_TLS_KEY is not; netarena gives both for h1-tls" if key.empty?
    [cert, key]
  end
end
