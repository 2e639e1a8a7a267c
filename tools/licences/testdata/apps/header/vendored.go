// Copyright (c) Example Corp
// SPDX-License-Identifier: BUSL-1.1

package main

func vendored() string { return "copied from a BUSL project" }
