//go:build !unix

package store

import "errors"

func statFSUsage(string) (fsUsage, error) { return fsUsage{}, errors.New("statfs: not supported") }
