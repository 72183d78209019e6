<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en_US">
<context>
    <name>BudgetAdvisorChart</name>
    <message>
        <source>Predicted TPOT</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted TTFT (right axis)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured replies</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Current budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Would swap</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ms per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>first token, ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>knee</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1: %2 ms per token, first token %3 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Computing the prediction…</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>BudgetMakespanChart</name>
    <message>
        <source>Predicted</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Lower bound</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Budget changed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ms per layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>samples, newest →</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>samples: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No layers measured yet: send a message to see the makespan.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>BudgetPage</name>
    <message>
        <source>full BF16 tensors</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>compressed (E-chunks + SM-chunk)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>sign-mantissa only</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>exponents only</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 %</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Enter the budget in MiB, e.g. 2048.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No expert runtime</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The memory budget can be set as soon as the expert runtime is open.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model with an expert runtime is open. Open a converted Mixture-of-Experts model (or the demo model) to set its memory budget and watch the F/C/S/E pools.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>pools: %1 of the experts&apos; BF16 bytes</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Held</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>of %1 budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Working set</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>staging + output slots</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>All experts (BF16)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Held / budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Set the budget (applies at once, also while a reply streams)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (minimum)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (every expert in BF16)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>MiB</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Apply</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pools for %1 % of the experts&apos; BF16 bytes: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pool split</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Miss rate</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>of %1 expert activations</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Expert bytes read</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>from the store since the model opened</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pools and threads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layer makespan: predicted vs measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>scheduler&apos;s simulation</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>acquire → last expert released</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Lower bound</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>max{I, C/L, P, Z}</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Replans</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>last took %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>none yet</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Budget advisor</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>At the current budget of %1 the planner predicts %2 per output token (%3 tokens/s).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The planner&apos;s prediction for every budget, computed from this machine&apos;s cost profile and the model&apos;s expert statistics.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Beyond %1 you gain less than %2 % per token.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Free memory: %1 of %2. A budget above %3 would make the system swap.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Free memory: %1 of %2; every budget fits without swapping.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TPOT = %1 for the model outside the experts (measured) + the planned expert layers; TTFT for a %2-token prompt.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The dense part of the model is not measured yet: the curve shows the expert layers alone until a reply is measured.</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n measured reply(s) shown. Click the chart to use that budget.</source>
        <translation>
            <numerusform>%n measured reply shown. Click the chart to use that budget.</numerusform>
            <numerusform>%n measured replies shown. Click the chart to use that budget.</numerusform>
        </translation>
    </message>
    <message>
        <source>Use the knee</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Every byte up to %1 (every expert in memory) still makes tokens faster.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This budget is more than the memory free now (%1 besides what the experts hold): the system would swap.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Following free memory stopped: you set the budget yourself. Switch it on to follow again.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Off: the budget stays where you set it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Following free memory, but the last reading or move failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Following free memory: waiting for the first reading…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 available, %2 left to other programs.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Last move at %1: %2 → %3 (%4).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No move yet.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Follow free memory</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The budget moves with the memory the machine has free, leaving a margin to other programs. Setting a budget yourself turns this off.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>BudgetPoolBar</name>
    <message>
        <source>%1 %2 %</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — %2: %3 % of the pool budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No plan yet</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;%1&lt;/b&gt; = %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&lt;b&gt;%1&lt;/b&gt; = %2 (off)</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>BudgetPoolTable</name>
    <message>
        <source>%1 %</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pool</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Share</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Capacity</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Used</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Resident experts</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Hit rate</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (off)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 of %2</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>BudgetRuntimeOptions</name>
    <message>
        <source>Enabled pools</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 — %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>At least one pool must stay enabled.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Decompression threads</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Applies after the current reply: the runtime reopens with the new thread count (running with %1 now).</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ChatListPane</name>
    <message>
        <source>New chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Search chats…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Rename</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete “%1” and all its messages?</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No chat matches.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No chats yet.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ChatPage</name>
    <message>
        <source>Say something to %1. The demo model was trained on Shakespeare: try “ROMEO:” or a line of verse.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>↓ Follow the reply</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>↓ Latest</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Message (Enter sends, Shift+Enter for a new line)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Waiting for the model…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Send</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Stop</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>↳ A branch of “%1”, from message %2.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open the original</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ErrorBanner</name>
    <message>
        <source>Chats are not being saved: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Dismiss</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>Main</name>
    <message>
        <source>ZipMoE — %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>ZipMoE</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open a model directory (Hugging Face checkpoint or ZipMoE store)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Schedule</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Settings</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>MessageDelegate</name>
    <message>
        <source>You</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>System</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Edit</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Save and resend</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Incomplete: the app stopped while this reply was being written.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Failed: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>TTFT %1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 tok/s</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n token(s)</source>
        <translation>
            <numerusform>%n token</numerusform>
            <numerusform>%n tokens</numerusform>
        </translation>
    </message>
    <message>
        <source>expert hit rate %1 %</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>stopped</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>length limit</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>context full</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Branch</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Continue the conversation from here in a new chat; this one stays as it is.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy %1 code (%2)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copy code (%1)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Copied</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Branches from here:</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ModelBar</name>
    <message>
        <source>%1 · %2 · %3 layers × %4 experts · budget %5</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The model did not open: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open model…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Demo model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Models…</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ModelManagerDialog</name>
    <message>
        <source>Models on this computer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Stores the app converted live in %1; stores opened from elsewhere are listed too.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (open)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 · %2 layers × %3 experts · codec %4 · %5 on disk</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>last used %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>never opened</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forget…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No stores yet: open a Hugging Face checkpoint to convert it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Convert another checkpoint…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Refresh</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Delete this store?</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Forget this store?</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>“%1” and its %2 on disk will be deleted. Its chats stay; the model can be converted again from its checkpoint.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>“%1” is not in the app&apos;s stores folder: it stays on disk, the app only stops listing it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Choose a Hugging Face checkpoint to convert</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>ScheduleLayerInspector</name>
    <message>
        <source>%1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layer %1 of token %2: predicted %3, measured %4</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted vs measured schedule of one layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Newest layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Inspect token/layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export visible range…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>idle</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>–</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Predicted</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Measured</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token %1 (%2 layers): stall %3 · I/O busy %4 · decompression busy %5 · recovery %6 · expert compute %7 · dense %8 · expert layers predicted %9, measured %10</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Outlined: the critical path (each operation waited for the one before it on its lane or in its tensor&apos;s DAG).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export the visible range as Chrome trace</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chrome trace (*.json)</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>Wrote %n event(s); open the file in ui.perfetto.dev or chrome://tracing.</source>
        <translation>
            <numerusform>Wrote %n event; open the file in ui.perfetto.dev or chrome://tracing.</numerusform>
            <numerusform>Wrote %n events; open the file in ui.perfetto.dev or chrome://tracing.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>SchedulePage</name>
    <message>
        <source>%1 ms</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 µs</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 ns</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 MiB</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 KiB</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 B</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>–</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token %1 is not in the capture.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layer %1 of token %2 is not in the capture.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Schedule</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Pause capture</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Resume capture</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Follow live</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>any</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Go</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Zoom to fit</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Clear</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n event(s)</source>
        <translation>
            <numerusform>%n event</numerusform>
            <numerusform>%n events</numerusform>
        </translation>
    </message>
    <message>
        <source>No operations yet: the schedule appears while the model generates.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Capture is paused.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 on %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Token %1, layer %2, expert %3</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Tensor %1, shard %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Duration: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Starts at: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Bytes: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>SettingsPage</name>
    <message>
        <source>The export failed.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Exported to %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Settings</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export the chat as Markdown</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Markdown files (*.md)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>All files (*)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export the chat as JSON</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>JSON files (*.json)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Language</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Interface language</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This chat: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>This chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open a chat or start a new one to edit its system prompt and sampling settings: every chat keeps its own.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>e.g. You are a concise assistant. (Saved when you leave the field.)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Sampling</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>0 = always the most likely token (greedy).</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Keep the k most likely tokens; 0 = off.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Keep the most likely tokens up to this total probability; 1 = off.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Drop tokens less likely than this fraction of the most likely one; 0 = off.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Repetition penalty</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>1 = off; higher values discourage repeating tokens.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Max new tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The reply stops after this many tokens.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Seed</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Random</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>0 = a new random seed for every reply; any other value repeats the same reply.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Model</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>A model is loading…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model is open.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Name</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Family</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layers</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Experts per layer</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Experts per token</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Context length</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 tokens</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Expert bytes (BF16)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Compute dtype</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Load time</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 s</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Source</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Store</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>History</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Database</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>None: chats are not kept after the app closes.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The database could not be opened: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Save the chat “%1” with its settings and messages.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open a chat to export it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export as Markdown…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Export as JSON…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Local server</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Serve the loaded model on this computer (OpenAI-compatible API)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>URL</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>API key</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>TraceOp</name>
    <message>
        <source>read SM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>read E</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>decompress</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>recover</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>read BF16</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>read E+SM</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>expert</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>dense</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>stall</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>prefetch</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::BudgetAdvisorModel</name>
    <message>
        <source>The budget advisor could not predict: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ChatController</name>
    <message>
        <source>Opening %1…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>History is not available: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>New chat</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Chat settings: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Unknown sampling setting &apos;%1&apos;.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Wait for the reply to finish, or stop it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model is ready yet.</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>The conversation is longer than the model&apos;s context: the %n oldest message(s) were left out.</source>
        <translation>
            <numerusform>The conversation is longer than the model&apos;s context: the oldest message was left out.</numerusform>
            <numerusform>The conversation is longer than the model&apos;s context: the %n oldest messages were left out.</numerusform>
        </translation>
    </message>
    <message>
        <source>There is no chat %1 to export.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No translation for &apos;%1&apos; in %2.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open a chat to branch it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Wait for the reply to end before branching the chat.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>%1 (branch)</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The chat history could not be updated: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::EngineWorker</name>
    <message>
        <source>Converting %1 to a ZipMoE store…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Converting: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Cancelled.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No model is open.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not %1: %2</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>read the saved cost profile</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>read the saved expert statistics</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Ignoring saved expert statistics for %1 layers × %2 experts: the model has %3 × %4.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>save the cost profile</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Open a model first: the local server serves the loaded model.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not save the expert statistics: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ModelStoresModel</name>
    <message>
        <source>&apos;%1&apos; is not a ZipMoE store the app knows.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>&apos;%1&apos; is open: open another model before deleting it.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not delete &apos;%1&apos;.</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::RuntimeMonitor</name>
    <message>
        <source>No model with an expert runtime is open.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Replanning failed; the previous pool split stays in force: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not follow free memory: %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ScheduleInspector</name>
    <message>
        <source>The capture holds no token yet: send a message.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>The capture holds no expert layer yet: send a message.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Layer %1 of token %2 is not in the capture.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No prediction for this layer: %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>No cost profile: the prediction needs the open store&apos;s profile.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Nothing to export: the visible range is empty.</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>Could not write %1: %2</source>
        <translation type="unfinished"></translation>
    </message>
</context>
<context>
    <name>zipmoe::app::TimelineModel</name>
    <message>
        <source>I/O</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>recovery</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>compute</source>
        <translation type="unfinished"></translation>
    </message>
    <message>
        <source>decompress %1</source>
        <translation type="unfinished"></translation>
    </message>
</context>
</TS>
