"""Why the S3 gateway is on aiohttp: 64 KiB GETs/s (4 keep-alive clients) and one 256 MiB streamed
GET, served by aiohttp, uvicorn + starlette and the standard library's http.server, in one run.

    pip install uvicorn starlette && python bench/http_stacks.py

(uvicorn and starlette are not dependencies of hedgefs: only this comparison needs them.)
Results: bench/results/2026-12-01-s3-http-stacks.md.
"""

import http.client
import http.server
import multiprocessing
import socketserver
import threading
import time

SMALL = b"x" * 65536
CHUNK = b"y" * (4 << 20)
BIG = 256 << 20


def run_aiohttp(port):
    from aiohttp import web

    async def h(request):
        if request.path == "/big":
            r = web.StreamResponse()
            r.content_length = BIG
            await r.prepare(request)
            for _ in range(BIG // len(CHUNK)):
                await r.write(CHUNK)
            return r
        return web.Response(body=SMALL)

    app = web.Application()
    app.router.add_get("/{t:.*}", h)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def run_uvicorn(port):
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def small(request):
        return Response(SMALL)

    async def big(request):
        async def gen():
            for _ in range(BIG // len(CHUNK)):
                yield CHUNK

        return StreamingResponse(gen(), headers={"content-length": str(BIG)})

    app = Starlette(routes=[Route("/big", big), Route("/s", small)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


def run_stdlib(port):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            n = BIG if self.path == "/big" else len(SMALL)
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            if self.path == "/big":
                for _ in range(BIG // len(CHUNK)):
                    self.wfile.write(CHUNK)
            else:
                self.wfile.write(SMALL)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    S(("127.0.0.1", port), H).serve_forever()


def client_small(port, n, out):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(n):
        c.request("GET", "/s")
        r = c.getresponse()
        r.read()
    out.append(n)


def measure(name, target, port):
    p = multiprocessing.Process(target=target, args=(port,), daemon=True)
    p.start()
    for _ in range(100):
        try:
            http.client.HTTPConnection("127.0.0.1", port).connect()
            break
        except OSError:
            time.sleep(0.1)
    res = []
    for rnd in range(2):
        out = []
        ts = [threading.Thread(target=client_small, args=(port, 500, out)) for _ in range(4)]
        t = time.perf_counter()
        [x.start() for x in ts]
        [x.join() for x in ts]
        small = 2000 / (time.perf_counter() - t)
        c = http.client.HTTPConnection("127.0.0.1", port)
        t = time.perf_counter()
        c.request("GET", "/big")
        r = c.getresponse()
        while r.read(1 << 20):
            pass
        big = BIG / (time.perf_counter() - t) / 1e6
        res.append((small, big))
    p.terminate()
    print(f"{name:<18} 64 KiB GETs/s {max(r[0] for r in res):7.0f}   256 MiB stream {max(r[1] for r in res):6.0f} MB/s")


if __name__ == "__main__":
    print(f"load {__import__('os').getloadavg()}")
    for i, (n, t) in enumerate(
        [("aiohttp", run_aiohttp), ("uvicorn+starlette", run_uvicorn), ("http.server", run_stdlib)]
    ):
        measure(n, t, 18000 + i)
    print(f"load {__import__('os').getloadavg()}")
