"""A throwaway certificate authority and TLS listeners on loopback, for tests of SNI and pinning.

`make_ca(tmp_path, "pinned.test")` writes a CA and a leaf certificate for the name; `TlsServer`
serves HTTPS on 127.0.0.1 (or any loopback address) with it and records the SNI name and the
`Host` header of every request, so a test can see which name a client asked for on a connection
it opened to an address it was told.
"""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Certs:
    ca: Path
    cert: Path
    key: Path


def make_ca(directory: Path, name: str) -> Certs:
    """Write `ca.pem`, `leaf.pem`, `leaf.key` under `directory`: a CA and a leaf for DNS name `name`."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agents test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=2)).add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2)).add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    certs = Certs(ca=directory / "ca.pem", cert=directory / "leaf.pem", key=directory / "leaf.key")
    certs.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certs.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    certs.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return certs


@dataclass
class TlsServer:
    """An HTTPS server on `host` answering 200 `hello`; `seen` holds (SNI, Host header) per request, `handshakes` every SNI."""

    certs: Certs
    host: str = "127.0.0.1"
    seen: list[tuple[str, str]] = field(default_factory=list)
    handshakes: list[str] = field(default_factory=list)

    def start(self) -> TlsServer:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certs.cert, self.certs.key)
        names = self.handshakes

        def remember(sock, server_name, _context):
            names.append(server_name or "")
            sock.sni = server_name or ""

        context.sni_callback = remember
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append((getattr(self.connection, "sni", ""), self.headers.get("Host", "")))
                self.send_response(200)
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"hello")

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def get_request(self):
                sock, address = super().get_request()
                return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

            def handle_error(self, request, client_address):  # a client that refuses our certificate
                pass

        class Handshaking(Handler):
            def setup(self):
                try:
                    self.request.do_handshake()
                except (ssl.SSLError, OSError):
                    pass
                super().setup()

        self.server = Server((self.host, 0), Handshaking)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
