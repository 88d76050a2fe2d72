package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// node is a parsed JSON value that keeps the order of object keys, so that a
// snapshot marshalled from a struct keeps its field order through
// normalisation and layout.
type node struct {
	kind  byte     // '{' object, '[' array, 0 scalar
	keys  []string // object keys, parallel to items
	items []node   // object values or array elements
	raw   string   // a scalar's JSON text
}

// parseNode parses one JSON value.
func parseNode(data []byte) (node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := decodeNode(dec)
	if err != nil {
		return node{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return node{}, fmt.Errorf("layout: trailing data after the JSON value")
	}
	return n, nil
}

func decodeNode(dec *json.Decoder) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return node{}, fmt.Errorf("layout: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		n := node{kind: byte(t)}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return node{}, fmt.Errorf("layout: %w", err)
				}
				n.keys = append(n.keys, k.(string))
			}
			item, err := decodeNode(dec)
			if err != nil {
				return node{}, err
			}
			n.items = append(n.items, item)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return node{}, fmt.Errorf("layout: %w", err)
		}
		return n, nil
	case string:
		return node{raw: quote(t)}, nil
	case json.Number:
		return node{raw: t.String()}, nil
	case bool:
		return node{raw: fmt.Sprint(t)}, nil
	case nil:
		return node{raw: "null"}, nil
	}
	return node{}, fmt.Errorf("layout: unexpected token %v", tok)
}

// quote returns s as a JSON string without HTML escaping, so that bodies such
// as {"delta":5} read as they are.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// field returns the value of the object key name.
func (n *node) field(name string) (*node, bool) {
	if n.kind != '{' {
		return nil, false
	}
	for i, k := range n.keys {
		if k == name {
			return &n.items[i], true
		}
	}
	return nil, false
}

// write lays n out: objects are expanded one key a line down to depth 1,
// arrays one element a line down to depth 2, and anything deeper is written
// compactly on one line. For a scenario result this gives one line per check,
// per trace entry and per table row.
func (n node) write(b *bytes.Buffer, depth int) {
	indent := strings.Repeat("  ", depth)
	switch {
	case n.kind == 0:
		b.WriteString(n.raw)
	case len(n.items) == 0:
		b.WriteByte(n.kind)
		b.WriteByte(closing(n.kind))
	case (n.kind == '{' && depth <= 1) || (n.kind == '[' && depth <= 2):
		b.WriteByte(n.kind)
		for i, item := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n" + indent + "  ")
			if n.kind == '{' {
				b.WriteString(quote(n.keys[i]) + ": ")
			}
			item.write(b, depth+1)
		}
		b.WriteString("\n" + indent)
		b.WriteByte(closing(n.kind))
	default:
		b.WriteByte(n.kind)
		for i, item := range n.items {
			if i > 0 {
				b.WriteByte(',')
			}
			if n.kind == '{' {
				b.WriteString(quote(n.keys[i]) + ":")
			}
			item.write(b, depth+1)
		}
		b.WriteByte(closing(n.kind))
	}
}

func closing(kind byte) byte {
	if kind == '{' {
		return '}'
	}
	return ']'
}

// compact writes n on one line.
func (n node) compact() []byte {
	var b bytes.Buffer
	n.write(&b, 99)
	return b.Bytes()
}
