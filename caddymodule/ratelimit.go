package caddymodule

import (
	"time"

	"github.com/hookgate/hookgate/deliver"
)

// rateView is a route's delivery rate, for operators.
type rateView struct {
	// Rate is the route's rate limit ("20/s"); absent when it has none.
	Rate string `json:"rate,omitempty"`
	// DrainTime is how long the backlog takes to start at that rate, to the second ("4m0s");
	// absent without a rate.
	DrainTime string `json:"drain_time,omitempty"`
}

// rateOf is what operators see of rate with backlog queued.
func rateOf(rate deliver.Rate, backlog int) rateView {
	if rate == (deliver.Rate{}) {
		return rateView{}
	}
	return rateView{Rate: rate.String(), DrainTime: rate.Drain(backlog).Round(time.Second).String()}
}
