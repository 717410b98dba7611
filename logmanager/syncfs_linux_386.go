package logmanager

// sysSyncfs is syncfs(2)'s number (the syscall package does not name it
// on 386).
const sysSyncfs = 344
