fn main() -> std::process::ExitCode {
    gateway::allocator::configure();
    gateway::cli::run()
}
