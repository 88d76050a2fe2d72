package fairness

// Candidate is a flow that has work ready now, with how often it has been
// served so far.
type Candidate struct {
	Flow   string
	Served int64
}

// A Selector picks one of the candidates; ok is false for an empty slice.
type Selector interface {
	Select(c []Candidate) (i int, ok bool)
}

// MinServed picks the candidate with the smallest Served; ties go to the
// smallest Flow (byte-wise string order). It is the order the queue store's
// claim follows.
var MinServed Selector = minServed{}

// Lexicographic picks the candidate with the smallest Flow, whatever it has
// been served. It is kept as the starvation counterexample.
var Lexicographic Selector = lexicographic{}

type minServed struct{}

// Select implements [Selector].
func (minServed) Select(c []Candidate) (int, bool) {
	if len(c) == 0 {
		return 0, false
	}
	best := 0
	for i := 1; i < len(c); i++ {
		if c[i].Served < c[best].Served ||
			(c[i].Served == c[best].Served && c[i].Flow < c[best].Flow) {
			best = i
		}
	}
	return best, true
}

type lexicographic struct{}

// Select implements [Selector].
func (lexicographic) Select(c []Candidate) (int, bool) {
	if len(c) == 0 {
		return 0, false
	}
	best := 0
	for i := 1; i < len(c); i++ {
		if c[i].Flow < c[best].Flow {
			best = i
		}
	}
	return best, true
}
