def main() -> None:
    print("netarena: orchestrator not built yet")
