package model

import "math"

// FitQuality describes how well a model fits the points it was given.
type FitQuality struct {
	Points int     `json:"points"` // samples used
	RMSE   float64 `json:"rmse"`   // root mean squared residual, in the model's output units
	// RelRMSE is the root mean squared relative residual (residual / observed).
	RelRMSE float64 `json:"rel_rmse"`
	// MaxRelErr is the largest relative residual.
	MaxRelErr float64 `json:"max_rel_err"`
}

func quality(pred, obs []float64) FitQuality {
	q := FitQuality{Points: len(obs)}
	if len(obs) == 0 {
		return q
	}
	var se, sr float64
	for i := range obs {
		d := pred[i] - obs[i]
		se += d * d
		if obs[i] != 0 {
			r := math.Abs(d / obs[i])
			sr += r * r
			q.MaxRelErr = math.Max(q.MaxRelErr, r)
		}
	}
	q.RMSE = math.Sqrt(se / float64(len(obs)))
	q.RelRMSE = math.Sqrt(sr / float64(len(obs)))
	return q
}
