//! nginx, the real server the HTTP/2 and https tests measure against: one process in the
//! foreground on a free loopback port, every file it writes under the test's own directory,
//! stopped when the handle is dropped. None when nginx is not installed (`make test` installs it:
//! .ci/debian-packages.txt); callers then report the feature missing.

use std::path::Path;
use std::time::Duration;

use super::run::wait_until;
use super::servers::free_port;

pub struct Nginx {
    child: std::process::Child,
    pub port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx with one `server` block: `server` is its body, in which `{port}` is the port it listens
/// on (e.g. "listen 127.0.0.1:{port} http2; location / { return 200 \"hi\"; }").
pub fn start_nginx(dir: &Path, server: &str) -> Option<Nginx> {
    let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let port = free_port();
    let d = dir.display();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process off; worker_processes 1;
pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  server {{
    {server}
  }}
}}
",
            server = server.replace("{port}", &port.to_string())
        ),
    )
    .unwrap();
    let child = std::process::Command::new(binary)
        .args([
            "-p",
            &dir.to_string_lossy(),
            "-e",
            &format!("{d}/error.log"),
        ])
        .arg("-c")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("nginx starts");
    let nginx = Nginx { child, port };
    wait_until("nginx to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Some(nginx)
}
