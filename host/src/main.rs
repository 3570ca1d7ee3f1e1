fn main() -> std::process::ExitCode {
    gateway::cli::run()
}
