//! The egress proxy of a private network: how a contained gateway (and the tools it runs)
//! reaches anything beyond the loopback endpoints relayed to it — a model provider occ does
//! not proxy, a channel's API, a web page. Its `HTTP_PROXY`/`HTTPS_PROXY` point at a port in
//! its own loopback that the inside relay forwards here, outside the sandbox.
//!
//! It speaks the two forms an HTTP client uses with a proxy: `CONNECT host:port` (a tunnel,
//! for TLS) and an absolute-form request (`GET http://host/path`, for plain HTTP). It
//! connects to an endpoint the revision's configuration names whatever its address; any other
//! destination only where every address it resolves to lies beyond this machine: never the
//! host's loopback or its own addresses (occ's API, other Agents' gateways, a local
//! database), link-local ones (cloud metadata services), unspecified or multicast ones.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Endpoints (lower-case host without brackets, port) the configuration names.
pub type Named = BTreeSet<(String, u16)>;

/// The largest request head the proxy reads.
const HEAD_MAX_BYTES: usize = 16 * 1024;

/// Serves one client connection.
pub(super) async fn serve<S>(mut client: S, named: &Named)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut head = Vec::new();
    let end = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if head.len() > HEAD_MAX_BYTES {
            return refuse(&mut client, 431, "the request head is too large").await;
        }
        let mut chunk = [0u8; 4096];
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    };
    let (head, rest) = head.split_at(end);
    let Ok(text) = std::str::from_utf8(head) else {
        return refuse(&mut client, 400, "the request head is not text").await;
    };
    let Some(request) = Request::parse(text) else {
        return refuse(
            &mut client,
            400,
            "not a proxy request (CONNECT host:port, or an absolute http:// URL)",
        )
        .await;
    };
    let mut upstream = match connect(&request.host, request.port, named).await {
        Ok(upstream) => upstream,
        Err((status, message)) => return refuse(&mut client, status, &message).await,
    };
    let sent = if request.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
    } else {
        upstream.write_all(request.forwarded_head.as_bytes()).await
    };
    if sent.is_err() || upstream.write_all(rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// A parsed proxy request.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    tunnel: bool,
    host: String,
    port: u16,
    /// For an absolute-form request: its head in origin form, without proxy headers.
    forwarded_head: String,
}

impl Request {
    fn parse(head: &str) -> Option<Self> {
        let mut lines = head.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let (method, target, version) = (first.next()?, first.next()?, first.next()?);
        if first.next().is_some() || !version.starts_with("HTTP/1.") {
            return None;
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            let url = url::Url::parse(&format!("http://{target}/")).ok()?;
            let port = url.port()?;
            return Some(Self {
                tunnel: true,
                host: host_of(&url)?,
                port,
                forwarded_head: String::new(),
            });
        }
        let url = url::Url::parse(target).ok()?;
        if url.scheme() != "http" {
            return None;
        }
        let path = &url[url::Position::BeforePath..];
        let mut forwarded = format!("{method} {path} {version}\r\n");
        for line in lines {
            let name = line.split(':').next().unwrap_or_default();
            if !name.to_ascii_lowercase().starts_with("proxy-") {
                forwarded.push_str(line);
                forwarded.push_str("\r\n");
            }
        }
        // `lines` ended with the blank line that closes the head; keep exactly one.
        while forwarded.ends_with("\r\n\r\n\r\n") {
            forwarded.truncate(forwarded.len() - 2);
        }
        Some(Self {
            tunnel: false,
            host: host_of(&url)?,
            port: url.port_or_known_default()?,
            forwarded_head: forwarded,
        })
    }
}

/// A URL's host as [`Named`] holds it.
pub(crate) fn host_of(url: &url::Url) -> Option<String> {
    Some(match url.host()? {
        url::Host::Domain(name) => name.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    })
}

/// Connects to `host:port` where the policy allows it.
async fn connect(host: &str, port: u16, named: &Named) -> Result<TcpStream, (u16, String)> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| (502, format!("cannot resolve {host}: {e}")))?
        .collect();
    let is_named = named.contains(&(host.to_owned(), port));
    let allowed: Vec<SocketAddr> = resolved
        .iter()
        .copied()
        .filter(|address| is_named || beyond_this_machine(address.ip()))
        .collect();
    // Every address must pass: a name that resolves to a public and a private address is
    // refused rather than tried until the private one answers.
    if allowed.is_empty() || allowed.len() < resolved.len() {
        return Err((
            403,
            format!(
                "outbound connections to {host}:{port} are refused: it is on this machine or link-local, and the configuration does not name it"
            ),
        ));
    }
    let mut last = String::new();
    for address in allowed {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e.to_string(),
        }
    }
    Err((502, format!("cannot connect to {host}:{port}: {last}")))
}

/// Whether `ip` is an address of another machine: not loopback, unspecified, link-local,
/// multicast or broadcast, and not one of this machine's own (those it can bind).
fn beyond_this_machine(ip: IpAddr) -> bool {
    let special = match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unicast_link_local()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| !beyond_this_machine(IpAddr::V4(v4)))
        }
    };
    !special && std::net::UdpSocket::bind((ip, 0)).is_err()
}

async fn refuse<S>(client: &mut S, status: u16, message: &str)
where
    S: AsyncWrite + Unpin,
{
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        _ => "Bad Gateway",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{message}\n",
        message.len() + 1
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_proxy_forms_are_read() {
        let tunnel = Request::parse(
            "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
        )
        .expect("connect");
        assert!(tunnel.tunnel);
        assert_eq!(
            (tunnel.host.as_str(), tunnel.port),
            ("api.example.com", 443)
        );
        let plain = Request::parse(
            "GET http://Models.example:8080/v1/models?x=1 HTTP/1.1\r\nHost: models.example:8080\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n",
        )
        .expect("absolute form");
        assert!(!plain.tunnel);
        assert_eq!((plain.host.as_str(), plain.port), ("models.example", 8080));
        assert_eq!(
            plain.forwarded_head,
            "GET /v1/models?x=1 HTTP/1.1\r\nHost: models.example:8080\r\nAccept: */*\r\n\r\n"
        );
        let v6 = Request::parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").expect("v6");
        assert_eq!(v6.host, "::1");
        for bad in [
            "GET /relative HTTP/1.1\r\n\r\n",
            "GET https://x.example/ HTTP/1.1\r\n\r\n",
            "CONNECT x.example HTTP/1.1\r\n\r\n",
            "CONNECT x.example:443 SPDY/3\r\n\r\n",
        ] {
            assert_eq!(Request::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_other_machines_are_beyond_this_one() {
        for here in [
            "127.0.0.1",
            "127.8.9.1",
            "0.0.0.0",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!beyond_this_machine(here.parse().expect(here)), "{here}");
        }
        // Documentation ranges no interface of a test machine holds.
        for there in ["198.51.100.7", "203.0.113.9", "2001:db8::5"] {
            assert!(beyond_this_machine(there.parse().expect(there)), "{there}");
        }
    }

    /// Through the proxy: the host's own listeners are refused with 403 unless the
    /// configuration names them, and a named one is reached in both forms.
    #[tokio::test]
    async fn the_host_is_reached_only_where_the_configuration_names_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let n = stream.read(&mut buf).await.unwrap_or(0);
                    let seen = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let body = format!("upstream saw: {}", seen.lines().next().unwrap_or(""));
                    let _ = stream
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .await;
                });
            }
        });
        let ask = |named: Named, request: String| async move {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let served = tokio::spawn(async move { serve(server, &named).await });
            client.write_all(request.as_bytes()).await.expect("write");
            let mut out = Vec::new();
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                client.read_to_end(&mut out),
            )
            .await;
            served.abort();
            String::from_utf8_lossy(&out).into_owned()
        };
        let refused = ask(
            Named::new(),
            format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: h\r\n\r\n"),
        )
        .await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        assert!(!refused.contains("upstream saw"), "{refused}");
        let refused = ask(
            Named::new(),
            format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");

        let named: Named = [("127.0.0.1".to_owned(), port)].into();
        let plain = ask(
            named.clone(),
            format!("GET http://127.0.0.1:{port}/x?y HTTP/1.1\r\nHost: h\r\nProxy-Connection: keep-alive\r\n\r\n"),
        )
        .await;
        assert!(
            plain.ends_with("upstream saw: GET /x?y HTTP/1.1"),
            "{plain}"
        );
        let tunnel = ask(
            named,
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /through HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(
            tunnel.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
            "{tunnel}"
        );
        assert!(
            tunnel.ends_with("upstream saw: GET /through HTTP/1.1"),
            "{tunnel}"
        );
    }
}
