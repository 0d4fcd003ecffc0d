/**
 * Realistic chat-sized texts for the token estimator test (a few hundred
 * characters each), written for this test: chat in several scripts, code,
 * JSON, logs, emoji, identifiers and tokens, numbers, symbols.
 */
export const SAMPLES: Record<string, string> = {
  english: `Thanks for the quick reply! I tried restarting the worker like you suggested, but the queue still looks stuck: \
the dashboard shows 42 jobs waiting and none active. The logs say "lease expired" a couple of times around 3:15 pm, \
then nothing. Could it be that the Redis instance ran out of memory? We're on the small plan with 256 MB, and \
last week's import added roughly two million keys. What would you check first, and is there a safe way to drain \
the backlog without losing any of the messages that were already accepted?`,

  chinese: `谢谢你的快速回复！我按照你的建议重启了工作进程，但是队列看起来仍然卡住了：控制面板显示有四十二个任务在等待，\
没有一个在运行。日志在下午三点十五分左右出现了几次“租约过期”，之后就什么都没有了。会不会是缓存服务器的内存用完了？\
我们用的是最小的套餐，只有二百五十六兆内存，而上周的数据导入增加了大约两百万个键。你会先检查什么？\
有没有一种安全的方法可以清空积压的任务，同时不丢失任何已经接收的消息？另外，我们下个月打算迁移到新的集群，\
在迁移之前需要做哪些准备工作？请尽量详细地说明每一步的原因。`,

  japanese: `早速のご返信ありがとうございます。ご提案どおりワーカーを再起動してみましたが、キューはまだ止まったままのようです。\
ダッシュボードには待機中のジョブが四十二件表示されていて、実行中のものは一件もありません。ログには午後三時十五分ごろに\
「リースの期限切れ」が何度か出ていて、その後は何も記録されていません。もしかしてサーバーのメモリが足りなくなったのでしょうか。\
私たちは二百五十六メガバイトの一番小さいプランを使っていて、先週のインポートでおよそ二百万個のキーが増えました。\
まず何を確認すればよいでしょうか。受け付け済みのメッセージを失わずに、溜まったジョブを安全に処理する方法はありますか。`,

  korean: `빠른 답변 감사합니다! 말씀하신 대로 워커를 다시 시작해 보았는데, 큐는 여전히 멈춰 있는 것 같습니다. \
대시보드에는 대기 중인 작업이 마흔두 개 있고 실행 중인 작업은 하나도 없습니다. 로그에는 오후 세 시 십오 분쯤 \
"임대 만료"가 몇 번 나타났고, 그 이후로는 아무것도 기록되지 않았습니다. 혹시 레디스 서버의 메모리가 부족해진 걸까요? \
저희는 이백오십육 메가바이트짜리 가장 작은 요금제를 쓰고 있고, 지난주 가져오기 작업으로 약 이백만 개의 키가 늘어났습니다. \
무엇부터 확인해야 할까요? 이미 받은 메시지를 잃지 않고 밀린 작업을 안전하게 처리할 방법이 있을까요?`,

  code: `export async function drainQueue(queue: Queue, opts: { batchSize?: number; signal?: AbortSignal } = {}): Promise<number> {
  const batchSize = opts.batchSize ?? 100;
  let drained = 0;
  for (;;) {
    if (opts.signal?.aborted) break;
    const jobs = await queue.getJobs(['waiting', 'delayed'], 0, batchSize - 1);
    if (jobs.length === 0) break;
    for (const job of jobs) {
      try {
        await job.promote();
        drained++;
      } catch (err) {
        logger.warn({ err, jobId: job.id }, 'could not promote job');
      }
    }
  }
  return drained;
}`,

  json: `{"status":"ok","results":[{"id":"job_8f3a","queue":"runs","state":"waiting","attempts":0,"createdAt":"2024-05-14T15:12:09.331Z","data":{"conversationId":"telegram:1234567","runId":"r_2b9c71"}},{"id":"job_8f3b","queue":"runs","state":"waiting","attempts":1,"createdAt":"2024-05-14T15:13:44.010Z","data":{"conversationId":"discord:998877:1122","runId":"r_2b9c72"}}],"memory":{"used_memory_human":"251.37M","maxmemory_human":"256.00M","evicted_keys":18234}}`,
  markdown: `Here's what I'd check, in order:

1. **Memory**: run \`INFO memory\` and compare \`used_memory\` with \`maxmemory\`. If \`evicted_keys\` is growing, the eviction policy may be removing job keys.
2. **Stalled jobs**: BullMQ moves a job back to *waiting* when its lock expires; look for \`stalled\` events in the worker log.
3. **Connection limits**: \`CLIENT LIST | wc -l\` — the small plan allows 30 connections.

> Tip: don't \`FLUSHALL\` to "unstick" things; you'd lose the accepted messages.`,

  log: `2024-05-14T15:14:02.118Z WARN  worker-3 lease expired run=r_2b9c71 conversation=telegram:1234567 held_ms=30412
2024-05-14T15:14:02.120Z INFO  worker-3 re-acquiring run=r_2b9c71 attempt=2 token=7
2024-05-14T15:14:05.901Z ERROR redis OOM command not allowed when used memory > 'maxmemory' (script: ingest-6)
2024-05-14T15:14:06.004Z INFO  host-1 503 POST /telegram/webhook 12ms retry_after=1`,

  mixed: `我们的 webhook 在 Redis 内存满了以后一直返回 503，Telegram 会自动重试吗？我看了一下日志，\`OOM command not allowed\` 出现了大概 120 次。\
如果我把 maxmemory-policy 改成 noeviction，已经接收的消息会不会丢失？`,
  'english-short':
    'The meeting is moved to Thursday because half of the team is travelling on Wednesday. Please update the release notes before then, and make sure the migration guide mentions the new environment variables. If anything blocks you, ping me directly rather than in the channel.',
  'chinese-short':
    '会议改到星期四了，因为星期三有一半的同事要出差。请在那之前更新发布说明，并确保迁移指南里提到了新的环境变量。如果有什么问题卡住了你，请直接联系我，不要在群里说。',
  'japanese-short':
    '水曜日はチームの半分が出張するため、会議は木曜日に変更になりました。それまでにリリースノートを更新し、移行ガイドに新しい環境変数が記載されているか確認してください。',
  'korean-short':
    '수요일에는 팀의 절반이 출장을 가기 때문에 회의가 목요일로 변경되었습니다. 그 전에 릴리스 노트를 업데이트하고, 마이그레이션 가이드에 새 환경 변수가 언급되어 있는지 확인해 주세요.',
  python:
    'def load_config(path: str) -> dict:\n    with open(path, encoding="utf-8") as fh:\n        data = yaml.safe_load(fh) or {}\n    for key in ("redis", "model", "channels"):\n        if key not in data:\n            raise ConfigError(f"missing section: {key}")\n    return data\n',
  emoji:
    'Great job team 🎉🎉 the release is out 🚀! Thanks 🙏 everyone ❤️ 👍👍👍 see you 😀😂🤣 next week. Family trip photos: 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵🇧🇷 ☺️ 🧑🏽‍💻👋🏻',
  'emoji-only': '😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲😋😛😜🤪😝🤑🤗🤭🤫🤔🤐🤨😐😑😶😏😒🙄😬🤥😌😔😪🤤😴😷🤒🤕🤢🤮🤧🥵🥶🥴😵🤯🤠🥳🥸😎🤓🧐',
  russian:
    'Спасибо за быстрый ответ! Я перезапустил воркер, как вы предложили, но очередь всё ещё выглядит застрявшей: панель показывает сорок два задания в ожидании, а память Redis почти заполнена.',
  french:
    "Merci pour la réponse rapide ! J'ai redémarré le travailleur comme vous l'avez suggéré, mais la file d'attente semble toujours bloquée : le tableau de bord affiche quarante-deux tâches en attente.",
  german:
    'Vielen Dank für die schnelle Antwort! Ich habe den Worker neu gestartet, aber die Warteschlange hängt immer noch: Das Dashboard zeigt zweiundvierzig wartende Aufträge. Größenänderungsüberprüfung läuft.',
  greek: 'Ευχαριστώ για τη γρήγορη απάντηση! Επανεκκίνησα τον εργάτη όπως προτείνατε, αλλά η ουρά φαίνεται ακόμα κολλημένη.',
  arabic: 'شكرا على الرد السريع! أعدت تشغيل العامل كما اقترحت، لكن قائمة الانتظار لا تزال عالقة.',
  hebrew: 'תודה על התשובה המהירה! הפעלתי מחדש את העובד כפי שהצעת, אבל התור עדיין נראה תקוע.',
  hindi: 'त्वरित उत्तर के लिए धन्यवाद! मैंने आपके सुझाव के अनुसार वर्कर को पुनः आरंभ किया, लेकिन कतार अभी भी अटकी हुई लगती है।',
  thai: 'ขอบคุณสำหรับการตอบกลับอย่างรวดเร็ว! ฉันรีสตาร์ทเวิร์กเกอร์ตามที่คุณแนะนำแล้ว แต่คิวยังดูเหมือนค้างอยู่',
  vietnamese: 'Cảm ơn bạn đã trả lời nhanh! Tôi đã khởi động lại worker như bạn đề nghị, nhưng hàng đợi vẫn có vẻ bị kẹt.',
  identifiers:
    'sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 commit 4c92026e1f3b9a7d2c5e8f0a1b3c4d5e6f7a8b9c run 3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c trace 7c9e6679-7425-40de-944b-e07fc1f90ae7',
  token:
    'Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c',
  numbers: 'pi 3.14159265358979, e 2718281828, total 1,234,567.89 over 0.000001 s, delta -42, eps 1e-9, 65536 4294967296 123456789012345678901234567890',
  urls: 'See https://example.com/api/v2/users/12345?include=orders&sort=-created_at#section-3 and https://github.com/owner/repo/blob/main/src/index.ts#L42-L57 for details.',
  shouting: 'WARNING: THE SYSTEM WILL REBOOT IN FIVE MINUTES. PLEASE SAVE YOUR WORK. NASA HTTP API URL JSON XML CPU GPU RAM SSD',
  'long-words': 'Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism floccinaucinihilipilification supercalifragilisticexpialidocious',
  symbols: '∀x∈ℝ: x² ≥ 0 ∧ ∑ᵢ aᵢ ≤ ∞ → ∫₀¹ f(x)dx ≈ π/4 ± ε; ½ ¼ ¾ °C µs ™ © ® § ¶ † ‡ • … ‰ ′ ″ ‹ › « » ← ↑ → ↓ ↔',
  table:
    '┌─────────┬──────────┬───────┐\n│ (index) │ name     │ o200k │\n├─────────┼──────────┼───────┤\n│ 0       │ english  │ 113   │\n└─────────┴──────────┴───────┘',
  html: '<div class="container"><p style="color:red">Hello <b>world</b></p><a href="/x?y=1&amp;z=2">link</a><br/><img src="a.png" alt=""/></div>',
  'cjk-code': 'const 用户名 = "张三"; // 获取用户信息\nif (用户名.length > 0) { console.log("你好，" + 用户名 + "！"); }',
};
