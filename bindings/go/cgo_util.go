package deepinfer

// #include "helpers.h"
import "C"

import "unsafe"

// cstr hands the bytes of s to C without a copy. Every text input of deepinfer.h is a
// (pointer, length) pair that the callee reads during the call only, and string data holds no Go
// pointers, as the cgo rules ask. (unsafe.StringData would say this directly; it arrived in Go
// 1.20.)
func cstr(s string) (*C.char, C.size_t) {
	if len(s) == 0 {
		return nil, 0
	}
	return *(**C.char)(unsafe.Pointer(&s)), C.size_t(len(s))
}

// cids hands an id slice to C without a copy (same rules as cstr).
func cids(ids []int32) (*C.int32_t, C.size_t) {
	if len(ids) == 0 {
		return nil, 0
	}
	return (*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids))
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// readInts runs the (buf, cap, *out_len) protocol for int32 outputs: a first try with a guess,
// then again with the size the library asked for (mutable data may grow between the calls).
func readInts(guess int, call func(buf *C.int32_t, cap C.size_t, outLen *C.size_t) *C.di_error) ([]int32, error) {
	buf := make([]int32, guess)
	for {
		var n C.size_t
		var p *C.int32_t
		if len(buf) > 0 {
			p = (*C.int32_t)(unsafe.Pointer(&buf[0]))
		}
		err := call(p, C.size_t(len(buf)), &n)
		if err == nil {
			if n == 0 {
				return nil, nil
			}
			return buf[:n], nil
		}
		if C.di_error_code(err) != C.DI_ERR_BUFFER_TOO_SMALL {
			return nil, check(err)
		}
		C.di_error_free(err)
		buf = make([]int32, n)
	}
}

// readText is readInts for text outputs.
func readText(guess int, call func(buf *C.char, cap C.size_t, outLen *C.size_t) *C.di_error) (string, error) {
	buf := make([]byte, guess)
	for {
		var n C.size_t
		var p *C.char
		if len(buf) > 0 {
			p = (*C.char)(unsafe.Pointer(&buf[0]))
		}
		err := call(p, C.size_t(len(buf)), &n)
		if err == nil {
			return string(buf[:n]), nil
		}
		if C.di_error_code(err) != C.DI_ERR_BUFFER_TOO_SMALL {
			return "", check(err)
		}
		C.di_error_free(err)
		buf = make([]byte, n)
	}
}
