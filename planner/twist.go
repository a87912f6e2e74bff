package planner

import (
	"fmt"
	"math"
)

// Twist is a planar velocity command in the robot's base frame (REP-103):
// LinearX in m/s (+ forward), AngularZ in rad/s (+ turns left).
type Twist struct {
	LinearX  float64
	AngularZ float64
}

// Zero returns the all-stop command. It is a function rather than a
// package variable so that no code can reassign what "stop" means.
func Zero() Twist { return Twist{} }

// IsZero reports whether t is the all-stop command.
func (t Twist) IsZero() bool { return t.LinearX == 0 && t.AngularZ == 0 }

// Limits bound a Twist. The zero value allows only the zero command.
type Limits struct {
	MaxSpeed   float64 // m/s, largest forward LinearX (≥ 0)
	MaxReverse float64 // m/s, largest backward speed (≥ 0); the planner never reverses, so 0
	MaxYawRate float64 // rad/s, largest |AngularZ| (≥ 0)
}

// Valid returns nil if t is finite and within l, else an error naming the
// offending field and value.
func (t Twist) Valid(l Limits) error {
	switch {
	case math.IsNaN(t.LinearX) || math.IsInf(t.LinearX, 0):
		return fmt.Errorf("%w: twist LinearX is %v", ErrNonFinite, t.LinearX)
	case math.IsNaN(t.AngularZ) || math.IsInf(t.AngularZ, 0):
		return fmt.Errorf("%w: twist AngularZ is %v", ErrNonFinite, t.AngularZ)
	case t.LinearX > l.MaxSpeed:
		return fmt.Errorf("%w: twist LinearX %v m/s exceeds MaxSpeed %v", ErrLimit, t.LinearX, l.MaxSpeed)
	case t.LinearX < -l.MaxReverse:
		return fmt.Errorf("%w: twist LinearX %v m/s exceeds MaxReverse %v", ErrLimit, t.LinearX, l.MaxReverse)
	case math.Abs(t.AngularZ) > l.MaxYawRate:
		return fmt.Errorf("%w: twist AngularZ %v rad/s exceeds MaxYawRate %v", ErrLimit, t.AngularZ, l.MaxYawRate)
	}
	return nil
}
