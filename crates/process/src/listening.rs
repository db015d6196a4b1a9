//! Whether a TCP port is listening, from the kernel's socket tables.

use std::io;

/// The socket state `/proc/net/tcp*` writes for `LISTEN`.
const TCP_LISTEN: &str = "0A";

/// Whether some socket listens on TCP `port` (any address, IPv4 or IPv6) in
/// the runtime's network namespace, from `/proc/net/tcp` and
/// `/proc/net/tcp6`. A table that cannot be read counts as no listener.
pub fn tcp_port_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|table| std::fs::read_to_string(table).is_ok_and(|text| lists_listener(&text, port)))
}

/// Whether a `/proc/net/tcp*` table lists a listener on `port`.
fn lists_listener(table: &str, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (Some(_slot), Some(local), Some(_remote), Some(state)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return false;
        };
        state == TCP_LISTEN && local_port(local).is_ok_and(|local| local == port)
    })
}

/// The port of an `ADDRESS:PORT` field (both in hex).
fn local_port(local: &str) -> io::Result<u16> {
    let (_, port) = local
        .rsplit_once(':')
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no port"))?;
    u16::from_str_radix(port, 16).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_listening_socket_on_the_port_counts() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1\n\
   1: 0100007F:1F91 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 2\n";
        assert!(lists_listener(table, 8080));
        assert!(
            !lists_listener(table, 8081),
            "an established connection is not a listener"
        );
        assert!(!lists_listener(table, 80));
    }

    #[test]
    fn a_real_listener_is_seen() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(tcp_port_listening(port));
        drop(listener);
        assert!(!tcp_port_listening(port));
    }
}
