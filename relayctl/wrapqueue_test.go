package main

import "github.com/fairrelay/fairrelay/clock"

// openWrapped returns an openQueueAt that opens the queue as relayctl does
// and puts wrap around its library, again after every reopen in real time,
// so that a test can change what one method of the store does.
func openWrapped(wrap func(queueLib) queueLib) func(path string) (*queueDB, error) {
	return func(path string) (*queueDB, error) {
		q, err := openQueueStore(path)
		if err != nil {
			return nil, err
		}
		inner, reopen := q.s, q.reopen
		q.s = wrap(inner)
		q.reopen = func(_ queueLib, src clock.Source, skew clock.Tick) (queueLib, error) {
			l, err := reopen(inner, src, skew)
			if err != nil {
				return nil, err
			}
			inner = l
			return wrap(l), nil
		}
		return q, nil
	}
}
