//go:build !linux

package logmanager

import "errors"

// syncFileSystem is Linux's syncfs(2): not available here.
func syncFileSystem(string) error { return errors.New("syncfs: not supported") }

// syncfsReportsErrors: there is no syncfs here; makeDurable fsyncs each
// file.
func syncfsReportsErrors() bool { return false }
