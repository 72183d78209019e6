<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN">
<context>
    <name>BudgetAdvisorChart</name>
    <message>
        <source>Predicted TPOT</source>
        <translation>预测 TPOT</translation>
    </message>
    <message>
        <source>Predicted TTFT (right axis)</source>
        <translation>预测 TTFT（右轴）</translation>
    </message>
    <message>
        <source>Measured replies</source>
        <translation>实测回复</translation>
    </message>
    <message>
        <source>Current budget</source>
        <translation>当前预算</translation>
    </message>
    <message>
        <source>Would swap</source>
        <translation>将导致换页</translation>
    </message>
    <message>
        <source>ms per token</source>
        <translation>每词元 ms</translation>
    </message>
    <message>
        <source>first token, ms</source>
        <translation>首词元 ms</translation>
    </message>
    <message>
        <source>knee</source>
        <translation>拐点</translation>
    </message>
    <message>
        <source>%1: %2 ms per token, first token %3 ms</source>
        <translation>%1：每词元 %2 ms，首词元 %3 ms</translation>
    </message>
    <message>
        <source>Computing the prediction…</source>
        <translation>正在计算预测…</translation>
    </message>
</context>
<context>
    <name>BudgetMakespanChart</name>
    <message>
        <source>Predicted</source>
        <translation>预测值</translation>
    </message>
    <message>
        <source>Measured</source>
        <translation>实测值</translation>
    </message>
    <message>
        <source>Lower bound</source>
        <translation>下界</translation>
    </message>
    <message>
        <source>Budget changed</source>
        <translation>预算变更</translation>
    </message>
    <message>
        <source>ms per layer</source>
        <translation>每层 ms</translation>
    </message>
    <message>
        <source>samples, newest →</source>
        <translation>样本，最新 →</translation>
    </message>
    <message>
        <source>%1 ms</source>
        <translation>%1 ms</translation>
    </message>
    <message>
        <source>samples: %1</source>
        <translation>样本：%1</translation>
    </message>
    <message>
        <source>No layers measured yet: send a message to see the makespan.</source>
        <translation>尚未测量任何层：发送一条消息即可查看完工时间。</translation>
    </message>
</context>
<context>
    <name>BudgetPage</name>
    <message>
        <source>full BF16 tensors</source>
        <translation>完整 BF16 张量</translation>
    </message>
    <message>
        <source>compressed (E-chunks + SM-chunk)</source>
        <translation>压缩（E 块 + SM 块）</translation>
    </message>
    <message>
        <source>sign-mantissa only</source>
        <translation>仅符号-尾数</translation>
    </message>
    <message>
        <source>exponents only</source>
        <translation>仅指数</translation>
    </message>
    <message>
        <source>%1 %</source>
        <translation>%1%</translation>
    </message>
    <message>
        <source>%1 ms</source>
        <translation>%1 ms</translation>
    </message>
    <message>
        <source>Enter the budget in MiB, e.g. 2048.</source>
        <translation>以 MiB 为单位输入预算，例如 2048。</translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation>内存预算</translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation>正在打开模型…</translation>
    </message>
    <message>
        <source>No expert runtime</source>
        <translation>无专家运行时</translation>
    </message>
    <message>
        <source>The memory budget can be set as soon as the expert runtime is open.</source>
        <translation>专家运行时打开后即可设置内存预算。</translation>
    </message>
    <message>
        <source>No model with an expert runtime is open. Open a converted Mixture-of-Experts model (or the demo model) to set its memory budget and watch the F/C/S/E pools.</source>
        <translation>未打开带专家运行时的模型。请打开已转换的混合专家（MoE）模型（或演示模型），以设置内存预算并查看 F/C/S/E 缓存池。</translation>
    </message>
    <message>
        <source>Budget</source>
        <translation>预算</translation>
    </message>
    <message>
        <source>pools: %1 of the experts&apos; BF16 bytes</source>
        <translation>缓存池：占专家 BF16 字节数的 %1</translation>
    </message>
    <message>
        <source>Held</source>
        <translation>已占用</translation>
    </message>
    <message>
        <source>of %1 budget</source>
        <translation>预算 %1</translation>
    </message>
    <message>
        <source>Working set</source>
        <translation>工作集</translation>
    </message>
    <message>
        <source>staging + output slots</source>
        <translation>暂存 + 输出槽</translation>
    </message>
    <message>
        <source>All experts (BF16)</source>
        <translation>全部专家（BF16）</translation>
    </message>
    <message>
        <source>Held / budget</source>
        <translation>已占用 / 预算</translation>
    </message>
    <message>
        <source>Set the budget (applies at once, also while a reply streams)</source>
        <translation>设置预算（立即生效，生成回复时也可调整）</translation>
    </message>
    <message>
        <source>%1 (minimum)</source>
        <translation>%1（最小值）</translation>
    </message>
    <message>
        <source>%1 (every expert in BF16)</source>
        <translation>%1（全部专家均为 BF16）</translation>
    </message>
    <message>
        <source>MiB</source>
        <translation>MiB</translation>
    </message>
    <message>
        <source>Apply</source>
        <translation>应用</translation>
    </message>
    <message>
        <source>Pools for %1 % of the experts&apos; BF16 bytes: %2</source>
        <translation>缓存池占专家 BF16 字节数的 %1%：%2</translation>
    </message>
    <message>
        <source>Pool split</source>
        <translation>缓存池划分</translation>
    </message>
    <message>
        <source>Miss rate</source>
        <translation>未命中率</translation>
    </message>
    <message>
        <source>of %1 expert activations</source>
        <translation>共 %1 次专家激活</translation>
    </message>
    <message>
        <source>Expert bytes read</source>
        <translation>已读取的专家字节数</translation>
    </message>
    <message>
        <source>from the store since the model opened</source>
        <translation>自模型打开以来从存储中读取</translation>
    </message>
    <message>
        <source>Pools and threads</source>
        <translation>缓存池与线程</translation>
    </message>
    <message>
        <source>Layer makespan: predicted vs measured</source>
        <translation>层完工时间：预测值与实测值</translation>
    </message>
    <message>
        <source>Predicted</source>
        <translation>预测值</translation>
    </message>
    <message>
        <source>scheduler&apos;s simulation</source>
        <translation>调度器模拟</translation>
    </message>
    <message>
        <source>Measured</source>
        <translation>实测值</translation>
    </message>
    <message>
        <source>acquire → last expert released</source>
        <translation>获取 → 最后一个专家释放</translation>
    </message>
    <message>
        <source>Lower bound</source>
        <translation>下界</translation>
    </message>
    <message>
        <source>max{I, C/L, P, Z}</source>
        <translation>max{I, C/L, P, Z}</translation>
    </message>
    <message>
        <source>Replans</source>
        <translation>重新规划次数</translation>
    </message>
    <message>
        <source>last took %1</source>
        <translation>上次耗时 %1</translation>
    </message>
    <message>
        <source>none yet</source>
        <translation>暂无</translation>
    </message>
    <message>
        <source>Budget advisor</source>
        <translation>预算顾问</translation>
    </message>
    <message>
        <source>At the current budget of %1 the planner predicts %2 per output token (%3 tokens/s).</source>
        <translation>在当前预算 %1 下，规划器预测每个输出词元 %2（%3 词元/秒）。</translation>
    </message>
    <message>
        <source>The planner&apos;s prediction for every budget, computed from this machine&apos;s cost profile and the model&apos;s expert statistics.</source>
        <translation>规划器对每个预算的预测，依据本机的成本画像和模型的专家统计计算。</translation>
    </message>
    <message>
        <source>Beyond %1 you gain less than %2 % per token.</source>
        <translation>超过 %1 后，每词元的收益不到 %2 %。</translation>
    </message>
    <message>
        <source>Free memory: %1 of %2. A budget above %3 would make the system swap.</source>
        <translation>可用内存：%1（共 %2）。超过 %3 的预算会使系统换页。</translation>
    </message>
    <message>
        <source>Free memory: %1 of %2; every budget fits without swapping.</source>
        <translation>可用内存：%1（共 %2）；任何预算都不会导致换页。</translation>
    </message>
    <message>
        <source>TPOT = %1 for the model outside the experts (measured) + the planned expert layers; TTFT for a %2-token prompt.</source>
        <translation>TPOT = 专家之外的模型部分 %1（实测）+ 规划的专家层；TTFT 按 %2 个词元的提示计算。</translation>
    </message>
    <message>
        <source>The dense part of the model is not measured yet: the curve shows the expert layers alone until a reply is measured.</source>
        <translation>模型的稠密部分尚未测量：在测得一条回复之前，曲线只显示专家层。</translation>
    </message>
    <message numerus="yes">
        <source>%n measured reply(s) shown. Click the chart to use that budget.</source>
        <translation>
            <numerusform>显示 %n 条实测回复。点击图表即可使用该预算。</numerusform>
        </translation>
    </message>
    <message>
        <source>Use the knee</source>
        <translation>使用拐点</translation>
    </message>
    <message>
        <source>Every byte up to %1 (every expert in memory) still makes tokens faster.</source>
        <translation>直到 %1（所有专家都在内存中）为止，每增加一字节都会让词元更快。</translation>
    </message>
    <message>
        <source>This budget is more than the memory free now (%1 besides what the experts hold): the system would swap.</source>
        <translation>此预算超过当前可用内存（除专家已占用的部分外还有 %1）：系统将会换页。</translation>
    </message>
    <message>
        <source>Following free memory stopped: you set the budget yourself. Switch it on to follow again.</source>
        <translation>已停止跟随可用内存：您自行设置了预算。打开开关即可重新跟随。</translation>
    </message>
    <message>
        <source>Off: the budget stays where you set it.</source>
        <translation>关闭：预算保持在您设置的值。</translation>
    </message>
    <message>
        <source>Following free memory, but the last reading or move failed: %1</source>
        <translation>正在跟随可用内存，但上一次读取或调整失败：%1</translation>
    </message>
    <message>
        <source>Following free memory: waiting for the first reading…</source>
        <translation>正在跟随可用内存：等待第一次读数…</translation>
    </message>
    <message>
        <source>%1 available, %2 left to other programs.</source>
        <translation>可用 %1，为其他程序保留 %2。</translation>
    </message>
    <message>
        <source>Last move at %1: %2 → %3 (%4).</source>
        <translation>上次调整于 %1：%2 → %3（%4）。</translation>
    </message>
    <message>
        <source>No move yet.</source>
        <translation>尚未调整。</translation>
    </message>
    <message>
        <source>Follow free memory</source>
        <translation>跟随可用内存</translation>
    </message>
    <message>
        <source>The budget moves with the memory the machine has free, leaving a margin to other programs. Setting a budget yourself turns this off.</source>
        <translation>预算随本机的可用内存变化，并为其他程序保留余量。自行设置预算会关闭此项。</translation>
    </message>
</context>
<context>
    <name>BudgetPoolBar</name>
    <message>
        <source>%1 %2 %</source>
        <translation>%1 %2%</translation>
    </message>
    <message>
        <source>%1 — %2: %3 % of the pool budget</source>
        <translation>%1 — %2：占缓存池预算的 %3%</translation>
    </message>
    <message>
        <source>No plan yet</source>
        <translation>暂无规划</translation>
    </message>
    <message>
        <source>&lt;b&gt;%1&lt;/b&gt; = %2</source>
        <translation>&lt;b&gt;%1&lt;/b&gt; = %2</translation>
    </message>
    <message>
        <source>&lt;b&gt;%1&lt;/b&gt; = %2 (off)</source>
        <translation>&lt;b&gt;%1&lt;/b&gt; = %2（已关闭）</translation>
    </message>
</context>
<context>
    <name>BudgetPoolTable</name>
    <message>
        <source>%1 %</source>
        <translation>%1%</translation>
    </message>
    <message>
        <source>Pool</source>
        <translation>缓存池</translation>
    </message>
    <message>
        <source>Share</source>
        <translation>占比</translation>
    </message>
    <message>
        <source>Capacity</source>
        <translation>容量</translation>
    </message>
    <message>
        <source>Used</source>
        <translation>已用</translation>
    </message>
    <message>
        <source>Resident experts</source>
        <translation>常驻专家</translation>
    </message>
    <message>
        <source>Hit rate</source>
        <translation>命中率</translation>
    </message>
    <message>
        <source>%1 (off)</source>
        <translation>%1（已关闭）</translation>
    </message>
    <message>
        <source>%1 of %2</source>
        <translation>%1 / %2</translation>
    </message>
</context>
<context>
    <name>BudgetRuntimeOptions</name>
    <message>
        <source>Enabled pools</source>
        <translation>启用的缓存池</translation>
    </message>
    <message>
        <source>%1 — %2</source>
        <translation>%1 — %2</translation>
    </message>
    <message>
        <source>At least one pool must stay enabled.</source>
        <translation>至少需要启用一个缓存池。</translation>
    </message>
    <message>
        <source>Decompression threads</source>
        <translation>解压线程</translation>
    </message>
    <message>
        <source>Applies after the current reply: the runtime reopens with the new thread count (running with %1 now).</source>
        <translation>在当前回复结束后生效：运行时将以新的线程数重新打开（当前为 %1 个线程）。</translation>
    </message>
</context>
<context>
    <name>ChatListPane</name>
    <message>
        <source>New chat</source>
        <translation>新建对话</translation>
    </message>
    <message>
        <source>Search chats…</source>
        <translation>搜索对话…</translation>
    </message>
    <message>
        <source>Rename</source>
        <translation>重命名</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>删除</translation>
    </message>
    <message>
        <source>Delete chat</source>
        <translation>删除对话</translation>
    </message>
    <message>
        <source>Delete “%1” and all its messages?</source>
        <translation>要删除“%1”及其全部消息吗？</translation>
    </message>
    <message>
        <source>No chat matches.</source>
        <translation>没有匹配的对话。</translation>
    </message>
    <message>
        <source>No chats yet.</source>
        <translation>还没有对话。</translation>
    </message>
</context>
<context>
    <name>ChatPage</name>
    <message>
        <source>Say something to %1. The demo model was trained on Shakespeare: try “ROMEO:” or a line of verse.</source>
        <translation>对 %1 说点什么吧。演示模型用莎士比亚作品训练：试试输入“ROMEO:”或一行诗句。</translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation>正在打开模型…</translation>
    </message>
    <message>
        <source>↓ Follow the reply</source>
        <translation>↓ 跟随回复</translation>
    </message>
    <message>
        <source>↓ Latest</source>
        <translation>↓ 最新</translation>
    </message>
    <message>
        <source>Message (Enter sends, Shift+Enter for a new line)</source>
        <translation>输入消息（Enter 发送，Shift+Enter 换行）</translation>
    </message>
    <message>
        <source>Waiting for the model…</source>
        <translation>正在等待模型…</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>发送</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>↳ A branch of “%1”, from message %2.</source>
        <translation>↳ “%1”的分支，从第 %2 条消息开始。</translation>
    </message>
    <message>
        <source>Open the original</source>
        <translation>打开原对话</translation>
    </message>
</context>
<context>
    <name>ErrorBanner</name>
    <message>
        <source>Chats are not being saved: %1</source>
        <translation>对话未能保存：%1</translation>
    </message>
    <message>
        <source>Dismiss</source>
        <translation>关闭</translation>
    </message>
</context>
<context>
    <name>Main</name>
    <message>
        <source>ZipMoE — %1</source>
        <translation>ZipMoE — %1</translation>
    </message>
    <message>
        <source>ZipMoE</source>
        <translation>ZipMoE</translation>
    </message>
    <message>
        <source>Open a model directory (Hugging Face checkpoint or ZipMoE store)</source>
        <translation>打开模型目录（Hugging Face 检查点或 ZipMoE 存储）</translation>
    </message>
    <message>
        <source>Chat</source>
        <translation>对话</translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation>内存预算</translation>
    </message>
    <message>
        <source>Schedule</source>
        <translation>调度</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
</context>
<context>
    <name>MessageDelegate</name>
    <message>
        <source>You</source>
        <translation>你</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>System</source>
        <translation>系统</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>编辑</translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation>重新生成</translation>
    </message>
    <message>
        <source>Save and resend</source>
        <translation>保存并重新发送</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Incomplete: the app stopped while this reply was being written.</source>
        <translation>不完整：生成此回复时应用已停止运行。</translation>
    </message>
    <message>
        <source>Failed: %1</source>
        <translation>失败：%1</translation>
    </message>
    <message>
        <source>TTFT %1 ms</source>
        <translation>TTFT %1 ms</translation>
    </message>
    <message>
        <source>%1 tok/s</source>
        <translation>%1 tok/s</translation>
    </message>
    <message numerus="yes">
        <source>%n token(s)</source>
        <translation>
            <numerusform>%n 个词元</numerusform>
        </translation>
    </message>
    <message>
        <source>expert hit rate %1 %</source>
        <translation>专家命中率 %1%</translation>
    </message>
    <message>
        <source>stopped</source>
        <translation>已停止</translation>
    </message>
    <message>
        <source>length limit</source>
        <translation>达到长度上限</translation>
    </message>
    <message>
        <source>context full</source>
        <translation>上下文已满</translation>
    </message>
    <message>
        <source>Branch</source>
        <translation>分支</translation>
    </message>
    <message>
        <source>Continue the conversation from here in a new chat; this one stays as it is.</source>
        <translation>从这里在新对话中继续；当前对话保持不变。</translation>
    </message>
    <message>
        <source>Copy %1 code (%2)</source>
        <translation>复制 %1 代码（%2）</translation>
    </message>
    <message>
        <source>Copy code (%1)</source>
        <translation>复制代码（%1）</translation>
    </message>
    <message>
        <source>Copied</source>
        <translation>已复制</translation>
    </message>
    <message>
        <source>Branches from here:</source>
        <translation>从此处分出的分支：</translation>
    </message>
</context>
<context>
    <name>ModelBar</name>
    <message>
        <source>%1 · %2 · %3 layers × %4 experts · budget %5</source>
        <translation>%1 · %2 · %3 层 × %4 个专家 · 预算 %5</translation>
    </message>
    <message>
        <source>The model did not open: %1</source>
        <translation>模型未能打开：%1</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Open model…</source>
        <translation>打开模型…</translation>
    </message>
    <message>
        <source>Demo model</source>
        <translation>演示模型</translation>
    </message>
    <message>
        <source>Models…</source>
        <translation>模型…</translation>
    </message>
</context>
<context>
    <name>ModelManagerDialog</name>
    <message>
        <source>Models on this computer</source>
        <translation>本机上的模型</translation>
    </message>
    <message>
        <source>Stores the app converted live in %1; stores opened from elsewhere are listed too.</source>
        <translation>应用转换的存储位于 %1；从其他位置打开的存储也会列出。</translation>
    </message>
    <message>
        <source>%1 (open)</source>
        <translation>%1（已打开）</translation>
    </message>
    <message>
        <source>%1 · %2 layers × %3 experts · codec %4 · %5 on disk</source>
        <translation>%1 · %2 层 × %3 个专家 · 编解码器 %4 · 磁盘占用 %5</translation>
    </message>
    <message>
        <source>last used %1</source>
        <translation>上次使用 %1</translation>
    </message>
    <message>
        <source>never opened</source>
        <translation>从未打开</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Delete…</source>
        <translation>删除…</translation>
    </message>
    <message>
        <source>Forget…</source>
        <translation>移除…</translation>
    </message>
    <message>
        <source>No stores yet: open a Hugging Face checkpoint to convert it.</source>
        <translation>还没有存储：打开一个 Hugging Face 检查点即可转换。</translation>
    </message>
    <message>
        <source>Convert another checkpoint…</source>
        <translation>转换其他检查点…</translation>
    </message>
    <message>
        <source>Refresh</source>
        <translation>刷新</translation>
    </message>
    <message>
        <source>Delete this store?</source>
        <translation>删除此存储？</translation>
    </message>
    <message>
        <source>Forget this store?</source>
        <translation>移除此存储？</translation>
    </message>
    <message>
        <source>“%1” and its %2 on disk will be deleted. Its chats stay; the model can be converted again from its checkpoint.</source>
        <translation>将删除“%1”及其占用的 %2 磁盘空间。相关对话会保留；模型可以从其检查点重新转换。</translation>
    </message>
    <message>
        <source>“%1” is not in the app&apos;s stores folder: it stays on disk, the app only stops listing it.</source>
        <translation>“%1”不在应用的存储文件夹中：它会保留在磁盘上，应用只是不再列出它。</translation>
    </message>
    <message>
        <source>Choose a Hugging Face checkpoint to convert</source>
        <translation>选择要转换的 Hugging Face 检查点</translation>
    </message>
</context>
<context>
    <name>ScheduleLayerInspector</name>
    <message>
        <source>%1 ms</source>
        <translation>%1 ms</translation>
    </message>
    <message>
        <source>Layer %1 of token %2: predicted %3, measured %4</source>
        <translation>词元 %2 的第 %1 层：预测 %3，实测 %4</translation>
    </message>
    <message>
        <source>Predicted vs measured schedule of one layer</source>
        <translation>单层调度：预测与实测</translation>
    </message>
    <message>
        <source>Newest layer</source>
        <translation>最新一层</translation>
    </message>
    <message>
        <source>Inspect token/layer</source>
        <translation>查看词元/层</translation>
    </message>
    <message>
        <source>Export visible range…</source>
        <translation>导出可见范围…</translation>
    </message>
    <message>
        <source>idle</source>
        <translation>空闲</translation>
    </message>
    <message>
        <source>–</source>
        <translation>–</translation>
    </message>
    <message>
        <source>Predicted</source>
        <translation>预测值</translation>
    </message>
    <message>
        <source>Measured</source>
        <translation>实测值</translation>
    </message>
    <message>
        <source>Token %1 (%2 layers): stall %3 · I/O busy %4 · decompression busy %5 · recovery %6 · expert compute %7 · dense %8 · expert layers predicted %9, measured %10</source>
        <translation>词元 %1（%2 层）：等待 %3 · I/O 忙 %4 · 解压忙 %5 · 恢复 %6 · 专家计算 %7 · 稠密 %8 · 专家层预测 %9，实测 %10</translation>
    </message>
    <message>
        <source>Outlined: the critical path (each operation waited for the one before it on its lane or in its tensor&apos;s DAG).</source>
        <translation>加框：关键路径（每个操作都在等待其所在通道或其张量 DAG 中的前一个操作）。</translation>
    </message>
    <message>
        <source>Export the visible range as Chrome trace</source>
        <translation>将可见范围导出为 Chrome 跟踪</translation>
    </message>
    <message>
        <source>Chrome trace (*.json)</source>
        <translation>Chrome 跟踪 (*.json)</translation>
    </message>
    <message numerus="yes">
        <source>Wrote %n event(s); open the file in ui.perfetto.dev or chrome://tracing.</source>
        <translation>
            <numerusform>已写入 %n 个事件；可在 ui.perfetto.dev 或 chrome://tracing 中打开该文件。</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>SchedulePage</name>
    <message>
        <source>%1 ms</source>
        <translation>%1 ms</translation>
    </message>
    <message>
        <source>%1 µs</source>
        <translation>%1 µs</translation>
    </message>
    <message>
        <source>%1 ns</source>
        <translation>%1 ns</translation>
    </message>
    <message>
        <source>%1 MiB</source>
        <translation>%1 MiB</translation>
    </message>
    <message>
        <source>%1 KiB</source>
        <translation>%1 KiB</translation>
    </message>
    <message>
        <source>%1 B</source>
        <translation>%1 B</translation>
    </message>
    <message>
        <source>–</source>
        <translation>–</translation>
    </message>
    <message>
        <source>Token %1 is not in the capture.</source>
        <translation>捕获的数据中没有词元 %1。</translation>
    </message>
    <message>
        <source>Layer %1 of token %2 is not in the capture.</source>
        <translation>捕获的数据中没有词元 %2 的第 %1 层。</translation>
    </message>
    <message>
        <source>Schedule</source>
        <translation>调度</translation>
    </message>
    <message>
        <source>Pause capture</source>
        <translation>暂停捕获</translation>
    </message>
    <message>
        <source>Resume capture</source>
        <translation>继续捕获</translation>
    </message>
    <message>
        <source>Follow live</source>
        <translation>实时跟随</translation>
    </message>
    <message>
        <source>Token</source>
        <translation>词元</translation>
    </message>
    <message>
        <source>Layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>any</source>
        <translation>任意</translation>
    </message>
    <message>
        <source>Go</source>
        <translation>转到</translation>
    </message>
    <message>
        <source>Zoom to fit</source>
        <translation>缩放以适应</translation>
    </message>
    <message>
        <source>Clear</source>
        <translation>清除</translation>
    </message>
    <message numerus="yes">
        <source>%n event(s)</source>
        <translation>
            <numerusform>%n 个事件</numerusform>
        </translation>
    </message>
    <message>
        <source>No operations yet: the schedule appears while the model generates.</source>
        <translation>暂无操作：模型生成时将在此显示调度。</translation>
    </message>
    <message>
        <source>Capture is paused.</source>
        <translation>捕获已暂停。</translation>
    </message>
    <message>
        <source>%1 on %2</source>
        <translation>%2：%1</translation>
    </message>
    <message>
        <source>Token %1, layer %2, expert %3</source>
        <translation>词元 %1，第 %2 层，专家 %3</translation>
    </message>
    <message>
        <source>Tensor %1, shard %2</source>
        <translation>张量 %1，分片 %2</translation>
    </message>
    <message>
        <source>Duration: %1</source>
        <translation>时长：%1</translation>
    </message>
    <message>
        <source>Starts at: %1</source>
        <translation>开始于：%1</translation>
    </message>
    <message>
        <source>Bytes: %1</source>
        <translation>字节数：%1</translation>
    </message>
</context>
<context>
    <name>SettingsPage</name>
    <message>
        <source>The export failed.</source>
        <translation>导出失败。</translation>
    </message>
    <message>
        <source>Exported to %1</source>
        <translation>已导出到 %1</translation>
    </message>
    <message>
        <source>chat</source>
        <translation>对话</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>设置</translation>
    </message>
    <message>
        <source>Export the chat as Markdown</source>
        <translation>将对话导出为 Markdown</translation>
    </message>
    <message>
        <source>Markdown files (*.md)</source>
        <translation>Markdown 文件 (*.md)</translation>
    </message>
    <message>
        <source>All files (*)</source>
        <translation>所有文件 (*)</translation>
    </message>
    <message>
        <source>Export the chat as JSON</source>
        <translation>将对话导出为 JSON</translation>
    </message>
    <message>
        <source>JSON files (*.json)</source>
        <translation>JSON 文件 (*.json)</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>语言</translation>
    </message>
    <message>
        <source>Interface language</source>
        <translation>界面语言</translation>
    </message>
    <message>
        <source>This chat: %1</source>
        <translation>当前对话：%1</translation>
    </message>
    <message>
        <source>This chat</source>
        <translation>当前对话</translation>
    </message>
    <message>
        <source>Open a chat or start a new one to edit its system prompt and sampling settings: every chat keeps its own.</source>
        <translation>打开或新建对话即可编辑其系统提示词和采样设置：每个对话各自保存自己的设置。</translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>系统提示词</translation>
    </message>
    <message>
        <source>e.g. You are a concise assistant. (Saved when you leave the field.)</source>
        <translation>例如：你是一个简洁的助手。（离开输入框时保存。）</translation>
    </message>
    <message>
        <source>Sampling</source>
        <translation>采样</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>0 = always the most likely token (greedy).</source>
        <translation>0 = 总是选择概率最高的词元（贪心）。</translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation>Top-k</translation>
    </message>
    <message>
        <source>Keep the k most likely tokens; 0 = off.</source>
        <translation>保留概率最高的 k 个词元；0 = 关闭。</translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation>Top-p</translation>
    </message>
    <message>
        <source>Keep the most likely tokens up to this total probability; 1 = off.</source>
        <translation>按概率从高到低保留词元，直到累计概率达到此值；1 = 关闭。</translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation>Min-p</translation>
    </message>
    <message>
        <source>Drop tokens less likely than this fraction of the most likely one; 0 = off.</source>
        <translation>丢弃概率低于最高概率乘以此比例的词元；0 = 关闭。</translation>
    </message>
    <message>
        <source>Repetition penalty</source>
        <translation>重复惩罚</translation>
    </message>
    <message>
        <source>1 = off; higher values discourage repeating tokens.</source>
        <translation>1 = 关闭；值越大，越不容易重复词元。</translation>
    </message>
    <message>
        <source>Max new tokens</source>
        <translation>最大新词元数</translation>
    </message>
    <message>
        <source>The reply stops after this many tokens.</source>
        <translation>回复达到此词元数后停止。</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>随机种子</translation>
    </message>
    <message>
        <source>Random</source>
        <translation>随机</translation>
    </message>
    <message>
        <source>0 = a new random seed for every reply; any other value repeats the same reply.</source>
        <translation>0 = 每次回复使用新的随机种子；其他值会重复生成相同的回复。</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>A model is loading…</source>
        <translation>正在加载模型…</translation>
    </message>
    <message>
        <source>No model is open.</source>
        <translation>未打开模型。</translation>
    </message>
    <message>
        <source>Name</source>
        <translation>名称</translation>
    </message>
    <message>
        <source>Family</source>
        <translation>系列</translation>
    </message>
    <message>
        <source>Layers</source>
        <translation>层数</translation>
    </message>
    <message>
        <source>Experts per layer</source>
        <translation>每层专家数</translation>
    </message>
    <message>
        <source>Experts per token</source>
        <translation>每词元专家数</translation>
    </message>
    <message>
        <source>Context length</source>
        <translation>上下文长度</translation>
    </message>
    <message>
        <source>%1 tokens</source>
        <translation>%1 个词元</translation>
    </message>
    <message>
        <source>Expert bytes (BF16)</source>
        <translation>专家字节数（BF16）</translation>
    </message>
    <message>
        <source>Compute dtype</source>
        <translation>计算数据类型</translation>
    </message>
    <message>
        <source>Load time</source>
        <translation>加载时间</translation>
    </message>
    <message>
        <source>%1 s</source>
        <translation>%1 秒</translation>
    </message>
    <message>
        <source>Source</source>
        <translation>来源</translation>
    </message>
    <message>
        <source>Store</source>
        <translation>存储</translation>
    </message>
    <message>
        <source>History</source>
        <translation>历史记录</translation>
    </message>
    <message>
        <source>Database</source>
        <translation>数据库</translation>
    </message>
    <message>
        <source>None: chats are not kept after the app closes.</source>
        <translation>无：应用关闭后不保留对话。</translation>
    </message>
    <message>
        <source>The database could not be opened: %1</source>
        <translation>无法打开数据库：%1</translation>
    </message>
    <message>
        <source>Export</source>
        <translation>导出</translation>
    </message>
    <message>
        <source>Save the chat “%1” with its settings and messages.</source>
        <translation>保存对话“%1”及其设置和消息。</translation>
    </message>
    <message>
        <source>Open a chat to export it.</source>
        <translation>请先打开要导出的对话。</translation>
    </message>
    <message>
        <source>Export as Markdown…</source>
        <translation>导出为 Markdown…</translation>
    </message>
    <message>
        <source>Export as JSON…</source>
        <translation>导出为 JSON…</translation>
    </message>
    <message>
        <source>Local server</source>
        <translation>本地服务器</translation>
    </message>
    <message>
        <source>Serve the loaded model on this computer (OpenAI-compatible API)</source>
        <translation>在本机提供已加载模型的服务（OpenAI 兼容 API）</translation>
    </message>
    <message>
        <source>URL</source>
        <translation>地址</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API 密钥</translation>
    </message>
</context>
<context>
    <name>TraceOp</name>
    <message>
        <source>read SM</source>
        <translation>读 SM</translation>
    </message>
    <message>
        <source>read E</source>
        <translation>读 E</translation>
    </message>
    <message>
        <source>decompress</source>
        <translation>解压</translation>
    </message>
    <message>
        <source>recover</source>
        <translation>恢复</translation>
    </message>
    <message>
        <source>read BF16</source>
        <translation>读 BF16</translation>
    </message>
    <message>
        <source>read E+SM</source>
        <translation>读 E+SM</translation>
    </message>
    <message>
        <source>expert</source>
        <translation>专家</translation>
    </message>
    <message>
        <source>dense</source>
        <translation>稠密</translation>
    </message>
    <message>
        <source>stall</source>
        <translation>停顿</translation>
    </message>
    <message>
        <source>prefetch</source>
        <translation>预取</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::BudgetAdvisorModel</name>
    <message>
        <source>The budget advisor could not predict: %1</source>
        <translation>预算顾问无法预测：%1</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ChatController</name>
    <message>
        <source>Opening %1…</source>
        <translation>正在打开 %1…</translation>
    </message>
    <message>
        <source>History is not available: %1</source>
        <translation>历史记录不可用：%1</translation>
    </message>
    <message>
        <source>New chat</source>
        <translation>新对话</translation>
    </message>
    <message>
        <source>Chat settings: %1</source>
        <translation>对话设置：%1</translation>
    </message>
    <message>
        <source>Unknown sampling setting &apos;%1&apos;.</source>
        <translation>未知的采样设置“%1”。</translation>
    </message>
    <message>
        <source>Wait for the reply to finish, or stop it.</source>
        <translation>请等待回复完成，或停止回复。</translation>
    </message>
    <message>
        <source>No model is ready yet.</source>
        <translation>模型尚未就绪。</translation>
    </message>
    <message numerus="yes">
        <source>The conversation is longer than the model&apos;s context: the %n oldest message(s) were left out.</source>
        <translation>
            <numerusform>对话长度超出了模型的上下文：已略去最早的 %n 条消息。</numerusform>
        </translation>
    </message>
    <message>
        <source>There is no chat %1 to export.</source>
        <translation>找不到要导出的对话 %1。</translation>
    </message>
    <message>
        <source>No translation for &apos;%1&apos; in %2.</source>
        <translation>在 %2 中找不到“%1”的翻译。</translation>
    </message>
    <message>
        <source>Open a chat to branch it.</source>
        <translation>请先打开一个对话再创建分支。</translation>
    </message>
    <message>
        <source>Wait for the reply to end before branching the chat.</source>
        <translation>请等待回复结束后再创建分支。</translation>
    </message>
    <message>
        <source>%1 (branch)</source>
        <translation>%1（分支）</translation>
    </message>
    <message>
        <source>The chat history could not be updated: %1</source>
        <translation>无法更新聊天记录：%1</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::EngineWorker</name>
    <message>
        <source>Converting %1 to a ZipMoE store…</source>
        <translation>正在将 %1 转换为 ZipMoE 存储…</translation>
    </message>
    <message>
        <source>Converting: %1</source>
        <translation>正在转换：%1</translation>
    </message>
    <message>
        <source>Opening the model…</source>
        <translation>正在打开模型…</translation>
    </message>
    <message>
        <source>Cancelled.</source>
        <translation>已取消。</translation>
    </message>
    <message>
        <source>No model is open.</source>
        <translation>未打开模型。</translation>
    </message>
    <message>
        <source>Could not %1: %2</source>
        <translation>无法%1：%2</translation>
    </message>
    <message>
        <source>read the saved cost profile</source>
        <translation>读取已保存的成本画像</translation>
    </message>
    <message>
        <source>read the saved expert statistics</source>
        <translation>读取已保存的专家统计</translation>
    </message>
    <message>
        <source>Ignoring saved expert statistics for %1 layers × %2 experts: the model has %3 × %4.</source>
        <translation>忽略为 %1 层 × %2 个专家保存的专家统计：该模型为 %3 × %4。</translation>
    </message>
    <message>
        <source>save the cost profile</source>
        <translation>保存成本画像</translation>
    </message>
    <message>
        <source>Open a model first: the local server serves the loaded model.</source>
        <translation>请先打开模型：本地服务器提供的是已加载的模型。</translation>
    </message>
    <message>
        <source>Could not save the expert statistics: %1</source>
        <translation>无法保存专家统计：%1</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ModelStoresModel</name>
    <message>
        <source>&apos;%1&apos; is not a ZipMoE store the app knows.</source>
        <translation>“%1”不是应用已知的 ZipMoE 存储。</translation>
    </message>
    <message>
        <source>&apos;%1&apos; is open: open another model before deleting it.</source>
        <translation>“%1”正在使用：请先打开其他模型再删除。</translation>
    </message>
    <message>
        <source>Could not delete &apos;%1&apos;.</source>
        <translation>无法删除“%1”。</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::RuntimeMonitor</name>
    <message>
        <source>No model with an expert runtime is open.</source>
        <translation>未打开带专家运行时的模型。</translation>
    </message>
    <message>
        <source>Replanning failed; the previous pool split stays in force: %1</source>
        <translation>重新规划失败；保持之前的池划分：%1</translation>
    </message>
    <message>
        <source>Could not follow free memory: %1</source>
        <translation>无法跟随可用内存：%1</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::ScheduleInspector</name>
    <message>
        <source>The capture holds no token yet: send a message.</source>
        <translation>捕获中还没有词元：请发送一条消息。</translation>
    </message>
    <message>
        <source>The capture holds no expert layer yet: send a message.</source>
        <translation>捕获中还没有专家层：请发送一条消息。</translation>
    </message>
    <message>
        <source>Layer %1 of token %2 is not in the capture.</source>
        <translation>词元 %2 的第 %1 层不在捕获中。</translation>
    </message>
    <message>
        <source>No prediction for this layer: %1</source>
        <translation>此层没有预测：%1</translation>
    </message>
    <message>
        <source>No cost profile: the prediction needs the open store&apos;s profile.</source>
        <translation>没有成本画像：预测需要已打开存储的成本画像。</translation>
    </message>
    <message>
        <source>Nothing to export: the visible range is empty.</source>
        <translation>没有可导出的内容：可见范围为空。</translation>
    </message>
    <message>
        <source>Could not write %1: %2</source>
        <translation>无法写入 %1：%2</translation>
    </message>
</context>
<context>
    <name>zipmoe::app::TimelineModel</name>
    <message>
        <source>I/O</source>
        <translation>I/O</translation>
    </message>
    <message>
        <source>recovery</source>
        <translation>恢复</translation>
    </message>
    <message>
        <source>compute</source>
        <translation>计算</translation>
    </message>
    <message>
        <source>decompress %1</source>
        <translation>解压 %1</translation>
    </message>
</context>
</TS>
