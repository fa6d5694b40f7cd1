package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxRequest bounds one request line, newline included: the server reads no more than this
// before it refuses the request. Requests are commands with small arguments (a rule, a file
// name); 64 KiB leaves room without letting a client make the server buffer without bound.
const MaxRequest = 64 << 10

// MaxResponse bounds one response line as the client reads it: a status of a busy device is
// tens of KiB; 16 MiB is far above any response the server builds, and still a bound.
const MaxResponse = 16 << 20

// MaxCommandName bounds a command's name.
const MaxCommandName = 64

// Named error codes of the protocol.
const (
	CodeBadRequest     = "bad-request"       // not a JSON object of the request shape
	CodeTooLarge       = "request-too-large" // longer than MaxRequest
	CodeUnknownCommand = "unknown-command"   // no handler of that name
	CodeBadArgs        = "bad-arguments"     // the handler could not use the arguments
	CodeFailed         = "failed"            // the handler returned an error without a code
	CodeShutdown       = "shutting-down"     // the server is closing
	CodeBusy           = "busy"              // too many clients connected
)

// Request is one request line.
type Request struct {
	Cmd  string          `json:"cmd"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Response is one response line: Result on success, Error otherwise.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a failed request: a named code (Code*) and a message for people. A Handler may
// return one (Errorf) to choose the code; any other error becomes CodeFailed.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("control: %s: %s", e.Code, e.Message) }

// Is makes errors.Is(err, &Error{Code: c}) match any error of code c.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Errorf builds an Error of a code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// DecodeArgs decodes a request's arguments into v strictly (unknown fields are refused, as a
// misspelt option must not be ignored); missing or null arguments leave v as it is. Its error
// has CodeBadArgs.
func DecodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(CodeBadArgs, "%v", err)
	}
	if dec.More() {
		return Errorf(CodeBadArgs, "trailing data after the arguments")
	}
	return nil
}

// decodeRequest parses one request line (without its newline).
func decodeRequest(line []byte) (Request, *Error) {
	var r Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, Errorf(CodeBadRequest, "%v", err)
	}
	if dec.More() {
		return Request{}, Errorf(CodeBadRequest, "more than one JSON value on the line")
	}
	if r.Cmd == "" {
		return Request{}, Errorf(CodeBadRequest, `no "cmd"`)
	}
	if len(r.Cmd) > MaxCommandName {
		return Request{}, Errorf(CodeBadRequest, "command name of %d bytes, at most %d", len(r.Cmd), MaxCommandName)
	}
	return r, nil
}
