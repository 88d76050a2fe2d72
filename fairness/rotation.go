package fairness

import (
	"errors"
	"fmt"
	"sort"
)

// Weights of the rotation policy: an integer from MinWeight to MaxWeight per
// flow; a flow whose weight was never set has DefaultWeight.
const (
	MinWeight     = 1
	MaxWeight     = 1000
	DefaultWeight = 1
)

// Scale is the virtual time one claim costs a flow of weight 1 under the
// rotation policy; a flow of weight w pays Scale/w per claim on average (see
// [Stride]). It is 720720 = lcm(1..16), so the stride of every weight from 1
// to 16 is exact. Passes grow by at most Scale per claim, so int64 passes
// cannot overflow before 2^63/Scale ≈ 1.28e13 claims.
const Scale int64 = 720720

// Errors of [Rotation]. A call that returns one of them changes nothing.
var (
	// ErrWeight is returned for a weight outside MinWeight..MaxWeight.
	ErrWeight = errors.New("fairness: weight out of range")
	// ErrFlowState is returned when a flow is not in the state a call
	// needs: Arrive of a flow that has a backlog, or Block, Ready or Leave of
	// a flow that has none.
	ErrFlowState = errors.New("fairness: flow is not in the required state")
)

// Stride is the virtual time a claim costs a flow of the given weight whose
// served count (claims before this one) is served:
//
//	r      = served % weight
//	Stride = (r+1)*Scale/weight - r*Scale/weight   (integer division)
//
// It is Scale/weight rounded down or up, and any k successive claims at the
// same weight cost floor((s+k)*Scale/weight) - floor(s*Scale/weight), which
// is within one unit of k*Scale/weight: rounding never accumulates, so
// long-run shares are exactly proportional to the weights. Nothing in it can
// overflow (r < 1000). The weight must be in MinWeight..MaxWeight and served
// must be >= 0.
func Stride(weight int, served int64) int64 {
	w := int64(weight)
	r := served % w
	return (r+1)*Scale/w - r*Scale/w
}

// Rotation is an exact, stateful model of the rotation policy: stride
// scheduling in integer virtual time, with newly arriving flows placed at the
// tail. Its zero value is ready to use. It is not safe for concurrent use.
//
// State. Each flow has a weight (1..1000, default 1), a pass P, a join number
// J, a served count and two flags: backlogged (it has events not yet acked)
// and ready (its head is dispatchable now). Globally: vnow (the pass of the
// flow picked last, 0 at first), vtail (the largest pass ever assigned, 0 at
// first) and joins (the number of arrivals so far).
//
// Rules, all in int64 arithmetic:
//
//   - Arrive (no backlog → backlog): P = max(P, vtail); joins = joins+1;
//     J = joins; the flow is backlogged and ready.
//   - Block (the head is not dispatchable: in flight, backing off,
//     quarantined): ready = false. Nothing else changes.
//   - Ready (a backlogged flow's head becomes dispatchable again):
//     P = max(P, vnow); ready = true; J is unchanged.
//   - Leave (the last event is acked): backlogged = ready = false; P, J and
//     served are kept.
//   - Pick: among ready flows the smallest (P, J); then vnow = P,
//     P = P + Stride(weight, served), served = served + 1,
//     vtail = max(vtail, P). Readiness is unchanged (Block it if the claim puts
//     the head in flight).
//   - SetWeight: weight = w. It affects only the strides of later claims.
//
// Consequences the queue relies on: every pass is <= vtail; a ready flow's
// pass is >= vnow, so vnow never decreases; J is unique, so (P, J) is a total
// order. Because a ready flow's pass is >= vnow, clamping with max(P, vnow)
// at any moment between the head becoming dispatchable and the next Pick
// gives the same result, so a store may clamp when it promotes due flows at
// the start of a claim, or order by (max(P, vnow), J).
//
// Bound: when a flow F becomes ready, no flow that arrives later is picked
// before F's next pick, and each flow j ≠ F that was backlogged at that
// moment is picked at most ceil(w_j / w_lo) + 1 times before it; see
// docs/fairness.md for w_lo and the proof.
type Rotation struct {
	flows              map[string]*rotFlow
	vnow, vtail, joins int64
}

type rotFlow struct {
	weight                int
	pass, joined, served  int64
	backlogged, readyFlag bool
}

// RotationFlow is the state of one flow in a [Rotation].
type RotationFlow struct {
	Flow       string
	Weight     int   // 1..1000
	Pass       int64 // P
	Joined     int64 // J: the join number of its last arrival (0: never arrived)
	Served     int64 // claims so far
	Backlogged bool  // it has events not yet acked
	Ready      bool  // its head is dispatchable
}

// RotationClock is the global state of a [Rotation].
type RotationClock struct {
	VNow  int64 // the pass of the flow picked last
	VTail int64 // the largest pass ever assigned
	Joins int64 // arrivals so far (the last J handed out)
}

func (r *Rotation) flow(f string) *rotFlow {
	if r.flows == nil {
		r.flows = map[string]*rotFlow{}
	}
	fl := r.flows[f]
	if fl == nil {
		fl = &rotFlow{weight: DefaultWeight}
		r.flows[f] = fl
	}
	return fl
}

// SetWeight sets the weight of flow (known or not) for its later claims.
func (r *Rotation) SetWeight(flow string, weight int) error {
	if weight < MinWeight || weight > MaxWeight {
		return fmt.Errorf("set weight of %q: %w: %d, want %d..%d", flow, ErrWeight, weight, MinWeight, MaxWeight)
	}
	r.flow(flow).weight = weight
	return nil
}

// Arrive records that flow goes from no backlog to a backlog with a
// dispatchable head: it joins at the tail, P = max(P, vtail), J = ++joins.
// (For a head that is not yet dispatchable, call Block right after.)
func (r *Rotation) Arrive(flow string) error {
	if fl := r.flows[flow]; fl != nil && fl.backlogged {
		return fmt.Errorf("arrive %q: %w: it already has a backlog", flow, ErrFlowState)
	}
	fl := r.flow(flow)
	fl.pass = max(fl.pass, r.vtail)
	r.joins++
	fl.joined = r.joins
	fl.backlogged, fl.readyFlag = true, true
	return nil
}

func (r *Rotation) backlogged(op, flow string) (*rotFlow, error) {
	fl := r.flows[flow]
	if fl == nil || !fl.backlogged {
		return nil, fmt.Errorf("%s %q: %w: it has no backlog", op, flow, ErrFlowState)
	}
	return fl, nil
}

// Block records that the head of a backlogged flow is not dispatchable.
func (r *Rotation) Block(flow string) error {
	fl, err := r.backlogged("block", flow)
	if err != nil {
		return err
	}
	fl.readyFlag = false
	return nil
}

// Ready records that the head of a backlogged flow is dispatchable:
// P = max(P, vnow), so time spent blocked banks no credit.
func (r *Rotation) Ready(flow string) error {
	fl, err := r.backlogged("ready", flow)
	if err != nil {
		return err
	}
	fl.pass = max(fl.pass, r.vnow)
	fl.readyFlag = true
	return nil
}

// Leave records that a backlogged flow has no events left to deliver.
func (r *Rotation) Leave(flow string) error {
	fl, err := r.backlogged("leave", flow)
	if err != nil {
		return err
	}
	fl.backlogged, fl.readyFlag = false, false
	return nil
}

// Peek returns the flow Pick would pick, without picking it.
func (r *Rotation) Peek() (string, bool) {
	best, bf := "", (*rotFlow)(nil)
	for f, fl := range r.flows {
		if !fl.readyFlag {
			continue
		}
		if bf == nil || fl.pass < bf.pass || fl.pass == bf.pass && fl.joined < bf.joined {
			best, bf = f, fl
		}
	}
	return best, bf != nil
}

// Pick picks the ready flow with the smallest (P, J) and charges it one claim:
// vnow = P, P += Stride(weight, served), served++, vtail = max(vtail, P).
// ok is false when no flow is ready.
func (r *Rotation) Pick() (flow string, ok bool) {
	flow, ok = r.Peek()
	if !ok {
		return "", false
	}
	fl := r.flows[flow]
	r.vnow = fl.pass
	fl.pass += Stride(fl.weight, fl.served)
	fl.served++
	r.vtail = max(r.vtail, fl.pass)
	return flow, true
}

// Flow returns the state of one flow; ok is false for a flow never seen.
func (r *Rotation) Flow(flow string) (RotationFlow, bool) {
	fl := r.flows[flow]
	if fl == nil {
		return RotationFlow{}, false
	}
	return fl.export(flow), true
}

func (fl *rotFlow) export(name string) RotationFlow {
	return RotationFlow{Flow: name, Weight: fl.weight, Pass: fl.pass, Joined: fl.joined,
		Served: fl.served, Backlogged: fl.backlogged, Ready: fl.readyFlag}
}

// Flows returns the state of every flow seen, sorted by flow ID, so that a
// store's rows can be compared with the model state for state.
func (r *Rotation) Flows() []RotationFlow {
	out := make([]RotationFlow, 0, len(r.flows))
	for f, fl := range r.flows {
		out = append(out, fl.export(f))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flow < out[j].Flow })
	return out
}

// Clock returns vnow, vtail and joins.
func (r *Rotation) Clock() RotationClock {
	return RotationClock{VNow: r.vnow, VTail: r.vtail, Joins: r.joins}
}

// SimulateRotation is [Simulate] for the rotation policy: at each step the
// arrivals of that step join their flows' backlogs first, in the order given (a
// flow whose backlog was empty arrives, at the tail); then the ready flow with
// the smallest (P, J) is served once, and a flow whose backlog becomes empty
// leaves. Every backlogged flow is ready (no leases, failures or time). weight
// gives each flow's weight when it is first seen (nil: every flow has
// DefaultWeight); a weight out of range is an ErrWeight error.
func SimulateRotation(weight func(flow string) int, arrivals Arrivals, steps int) ([]string, error) {
	var r Rotation
	backlog := map[string]int{}
	out := make([]string, 0, max(steps, 0))
	for step := 0; step < steps; step++ {
		if arrivals != nil {
			for _, f := range arrivals(step) {
				if _, seen := r.flows[f]; !seen && weight != nil {
					if err := r.SetWeight(f, weight(f)); err != nil {
						return nil, fmt.Errorf("simulate rotation: step %d: %w", step, err)
					}
				}
				if backlog[f] == 0 {
					if err := r.Arrive(f); err != nil {
						return nil, fmt.Errorf("simulate rotation: step %d: %w", step, err)
					}
				}
				backlog[f]++
			}
		}
		f, ok := r.Pick()
		if !ok {
			out = append(out, "")
			continue
		}
		backlog[f]--
		if backlog[f] == 0 {
			if err := r.Leave(f); err != nil {
				return nil, fmt.Errorf("simulate rotation: step %d: %w", step, err)
			}
		}
		out = append(out, f)
	}
	return out, nil
}
