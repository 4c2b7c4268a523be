package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// apiError is an error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 invalid_request_error about param (may be empty).
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...),
		Type: "invalid_request_error", Param: strPtr(param)}
}

func notFound(code, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...),
		Type: "invalid_request_error", Code: strPtr(code)}
}

// requestParams are the request fields whose names the library uses in its messages, so that an
// error about one names it as param.
var requestParams = []string{"temperature", "top_p", "top_k", "min_p", "max_tokens", "min_tokens", "n", "logprobs",
	"top_logprobs", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "stop", "seed"}

// fromEngine turns an error of the library into the status a client can act on: what the request
// asked for wrong is a 400, what went wrong here a 500.
func fromEngine(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	var de *deepinfer.Error
	if errors.As(err, &de) {
		msg = de.Message
	}
	switch {
	case errors.Is(err, deepinfer.ErrCapacity):
		e := badRequest("", "%s", msg)
		e.Code = strPtr("context_length_exceeded")
		return e
	case errors.Is(err, deepinfer.ErrInvalidArgument), errors.Is(err, deepinfer.ErrGrammar),
		errors.Is(err, deepinfer.ErrUnsupported), errors.Is(err, deepinfer.ErrState):
		param := ""
		for _, p := range requestParams {
			if strings.HasPrefix(msg, p) && (len(msg) == len(p) || !isIdentByte(msg[len(p)])) {
				param = p
				break
			}
		}
		return badRequest(param, "%s", msg)
	case errors.Is(err, deepinfer.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Message: "the server is shutting down", Type: "server_error"}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: msg, Type: "server_error"}
}

func isIdentByte(b byte) bool { return b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}

// decodeError explains why a body is not the JSON a request needs.
func decodeError(err error) *apiError {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var tooLarge *http.MaxBytesError
	var api *apiError
	switch {
	case errors.As(err, &api):
		return api
	case errors.As(err, &tooLarge):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Message: "the request body is too large",
			Type: "invalid_request_error"}
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body is not valid JSON: %v", err)
	case errors.As(err, &typeErr):
		return badRequest(typeErr.Field, "%s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	return badRequest("", "the request body is not valid: %v", err)
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case goKind == "slice":
		return "an array"
	}
	return "an object"
}
