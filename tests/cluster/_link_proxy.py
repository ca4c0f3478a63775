"""A node's own link to the broker, as a TCP proxy the test can cut: the broker and every
other node's link stay up. Cut, it closes the connections it carries and every new one
at once (a port blocked with a reject, a proxy gone, a TLS handshake refused)."""
import socket
import threading

from _harness import free_tcp_port, relay


class LinkProxy:
    def __init__(self, upstream=("127.0.0.1", 61613)):
        self.upstream = upstream
        self.port = free_tcp_port()
        self.cut_flag = False
        self.lock = threading.Lock()
        self.open = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"stomp://127.0.0.1:{self.port}"

    def cut(self):
        with self.lock:
            self.cut_flag = True
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open = []

    def heal(self):
        with self.lock:
            self.cut_flag = False

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.cut_flag:
                    client.close()
                    continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.cut_flag:
                    client.close()
                    server.close()
                    continue
                self.open += [client, server]
            threading.Thread(target=relay, args=(client, server), daemon=True).start()
            threading.Thread(target=relay, args=(server, client), daemon=True).start()

    def close(self):
        self.cut()
        self.listener.close()
