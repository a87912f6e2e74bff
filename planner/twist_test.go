package planner

import (
	"errors"
	"math"
	"testing"
)

func TestTwistValid(t *testing.T) {
	lim := Limits{MaxSpeed: 1, MaxReverse: 0.2, MaxYawRate: 0.5}
	tests := []struct {
		name    string
		twist   Twist
		wantErr error
	}{
		{"zero", Zero(), nil},
		{"at the limits", Twist{1, -0.5}, nil},
		{"reverse within MaxReverse", Twist{-0.2, 0.5}, nil},
		{"too fast", Twist{1.0000001, 0}, ErrLimit},
		{"too fast backwards", Twist{-0.3, 0}, ErrLimit},
		{"yaw too fast left", Twist{0, 0.6}, ErrLimit},
		{"yaw too fast right", Twist{0, -0.6}, ErrLimit},
		{"NaN speed", Twist{math.NaN(), 0}, ErrNonFinite},
		{"Inf yaw", Twist{0, math.Inf(-1)}, ErrNonFinite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.twist.Valid(lim)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Valid(%+v) = %v, want %v", tt.twist, err, tt.wantErr)
			}
		})
	}
	if !Zero().IsZero() || (Twist{0, 1e-300}).IsZero() {
		t.Fatal("IsZero wrong")
	}
}
