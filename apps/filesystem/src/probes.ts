// SPDX-License-Identifier: Apache-2.0
// Python one-liners for the probes Node cannot make itself. Each prints one JSON object.

const errorText = `
def err(e):
    import errno, os
    code = errno.errorcode.get(e.errno or 0, "")
    msg = os.strerror(e.errno) if e.errno else str(e)
    return (code + ": " + msg) if code else msg
`;

export const probes = {
	rawSocketProbe(host: string): string {
		return `${errorText}
import json, socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    try:
        s.sendto(b"\\x08\\x00\\xf7\\xff\\x00\\x00\\x00\\x00", (${JSON.stringify(host)}, 0))
    except OSError:
        pass
    s.close()
    print(json.dumps({"opened": True}))
except OSError as e:
    print(json.dumps({"opened": False, "error": err(e)}))
`;
	},
	userNamespaceProbe(): string {
		return `${errorText}
import ctypes, json, os
CLONE_NEWUSER = 0x10000000
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(CLONE_NEWUSER) != 0:
    e = ctypes.get_errno()
    print(json.dumps({"created": False, "regainedCaps": False, "error": err(OSError(e, os.strerror(e)))}))
else:
    caps = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
    print(json.dumps({"created": True, "regainedCaps": caps != 0}))
`;
	},
};
