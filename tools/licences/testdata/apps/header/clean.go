// SPDX-License-Identifier: MPL-2.0

package main

func clean() string { return "caravan's own" }
