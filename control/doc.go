// Package control is the control socket of a running vgpu server: a unix stream socket that
// only the server's owner can connect to, carrying one JSON request per line and one JSON
// response per line. Other packages register commands on a Server (Handle); `vgpu status`
// and the fault-injection and snapshot commands are such commands.
//
// # Protocol
//
// A request is one line (at most MaxRequest bytes, newline included):
//
//	{"cmd":"status","args":{...}}
//
// and its response is one line:
//
//	{"result":...}                                   success
//	{"error":{"code":"unknown-command","message":"…"}}  failure, with a named code (Code*)
//
// A client may send any number of requests on one connection; responses come back in request
// order. A request larger than MaxRequest gets a request-too-large error and the connection
// is closed (the rest of the line cannot be told from the next request).
//
// # Permissions
//
// Listen binds the socket inside a fresh 0700 directory next to the target path, sets the
// socket file to 0600 and renames it into place, so no other user can connect at any moment
// (a chmod after bind would leave a window; a umask is process-wide). Like the vfio-user
// socket, an existing non-socket file at the path is refused, a live socket is refused, and a
// stale one (a killed server's) is replaced.
//
// # Threading
//
// Each connection has its own goroutine; handlers of different connections run concurrently,
// so a Handler must be safe for concurrent use. Close stops accepting, closes every
// connection (a blocked client gets EOF) and waits for the connection goroutines; a handler
// still running finishes first, so handlers must not block without bound.
package control
