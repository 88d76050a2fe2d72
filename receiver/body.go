package receiver

import "fmt"

// MaxBodyLen is the largest body, in bytes, that Receive reads. A longer
// body is [ErrInvalidBody].
const MaxBodyLen = 4096

// ParseDelta reads a body of the exact form {"delta": N} and returns N.
//
// The grammar is a strict subset of JSON (RFC 8259), byte for byte:
//
//	body  = ws "{" ws %s"\"delta\"" ws ":" ws int ws "}" ws
//	int   = ["-"] ("0" / %x31-39 *DIGIT)
//	ws    = *(%x20 / %x09 / %x0A / %x0D)
//
// So the object has exactly one member, spelled "delta" without escapes; its
// value is a JSON integer token (no fraction, no exponent: 1.0 and 1e2 are
// refused even though they denote integers); nothing but whitespace may
// follow the object. N must lie in 1..1000. Every refusal wraps
// [ErrInvalidBody].
func ParseDelta(b []byte) (int64, error) {
	if len(b) > MaxBodyLen {
		return 0, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidBody, len(b), MaxBodyLen)
	}
	p := parser{b: b}
	p.ws()
	if !p.lit(`{`) {
		return 0, p.fail("want '{'")
	}
	p.ws()
	if !p.lit(`"delta"`) {
		return 0, p.fail(`want the member name "delta"`)
	}
	p.ws()
	if !p.lit(`:`) {
		return 0, p.fail("want ':'")
	}
	p.ws()
	n, ok := p.integer()
	if !ok {
		return 0, p.fail("want an integer token")
	}
	p.ws()
	if !p.lit(`}`) {
		return 0, p.fail("want '}' (one member only, integer tokens only)")
	}
	p.ws()
	if p.i != len(p.b) {
		return 0, p.fail("trailing bytes after the object")
	}
	if n < 1 || n > DefaultMaxDelta {
		return 0, fmt.Errorf("%w: delta %d outside 1..%d", ErrInvalidBody, n, DefaultMaxDelta)
	}
	return n, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrInvalidBody, what, p.i)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// integer reads a JSON integer token. Values beyond 9999 in magnitude are
// clamped to ±10000: they are out of range either way, and clamping avoids
// overflow on long digit strings.
// On failure p.i is left at the start of the token.
func (p *parser) integer() (int64, bool) {
	start := p.i
	neg := p.lit("-")
	if p.i >= len(p.b) || p.b[p.i] < '0' || p.b[p.i] > '9' {
		p.i = start
		return 0, false
	}
	var n int64
	if p.b[p.i] == '0' {
		p.i++
	} else {
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			if n < 10000 {
				n = n*10 + int64(p.b[p.i]-'0')
			}
			p.i++
		}
		n = min(n, 10000)
	}
	// A fraction or exponent makes the token a non-integer number.
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E' || (p.b[p.i] >= '0' && p.b[p.i] <= '9')) {
		p.i = start
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
