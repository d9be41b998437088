"""Where the launcher's store is, for the rendezvous of cann_dist (__init__.py) and
cann_dist.elastic."""
import os


def store_endpoint(environ=None):
    """(host, port) of the rendezvous store: CDT_STORE_ENDPOINT under `cann-dist-train launch`
    (whose MASTER_ADDR:MASTER_PORT is torch's own TCPStore, hosted by rank 0 for scripts that do
    not import cann_dist), else MASTER_ADDR:MASTER_PORT."""
    e = os.environ if environ is None else environ
    endpoint = e.get("CDT_STORE_ENDPOINT")
    if endpoint:
        host, _, port = endpoint.rpartition(":")
        return host.strip("[]"), int(port)
    return e.get("MASTER_ADDR", "127.0.0.1"), int(e.get("MASTER_PORT", "0"))
