fn main() {
    std::process::exit(servesim::cli::main());
}
