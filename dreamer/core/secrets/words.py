"""The words that say a secret follows, in English, French, German, Spanish, Portuguese, Italian
and Japanese: read by `secret_meaning`.

A label is a *head* (what the secret is: a password, a PIN, a code, an answer, ...), which may
carry a *thing* (what it opens: the Wi-Fi, a door, an alarm, a safe, a locker, a card) before it
("door code", "WLAN-Passwort", "玄関の暗証番号"), right after it ("code wifi", "clé Wi-Fi") or in
the words that follow it ("the code for the front door", "il codice del cancello"). The head
says the shape the value takes; the thing, when there is one, names the kind.

Every entry is a regex fragment, matched case-insensitively; longer entries first where one
begins another.
"""

from __future__ import annotations

# --- heads: (family, default kind, words by language) ---------------------------------------
# The family gives the value's shape (`secret_shapes.SHAPES`); a "code" or "key" head says
# nothing alone ("the code is 200 lines") and counts only with a thing it opens.

# fmt: off
HEADS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("answer", "security_answer", (
        r"(?:my\s+)?mother['’]?s\s+maiden\s+name|maiden\s+name|security\s+answer|secret\s+answer",  # en
        r"answer\s+to\s+(?:my|the|your)\s+(?:security|secret)\s+question|(?:security|secret)\s+question\s+answer",
        r"(?:my\s+)?first\s+pet['’]?s\s+name|name\s+of\s+my\s+first\s+pet|first\s+pet",
        r"nom\s+de\s+jeune\s+fille(?:\s+de\s+ma\s+m[èe]re)?|r[ée]ponse\s+secr[èe]te",  # fr
        r"r[ée]ponse\s+(?:[àa]\s+(?:la|ma)\s+)?question\s+(?:secr[èe]te|de\s+s[ée]curit[ée])",
        r"m[äa]dchenname(?:\s+meiner\s+mutter)?|geburtsname\s+meiner\s+mutter|sicherheitsantwort",  # de
        r"antwort\s+auf\s+(?:die|meine)\s+sicherheitsfrage",
        r"apellido\s+de\s+soltera(?:\s+de\s+mi\s+madre)?|respuesta\s+(?:de\s+seguridad|secreta)",  # es
        r"respuesta\s+a\s+(?:la|mi)\s+pregunta\s+(?:de\s+seguridad|secreta)",
        r"nome\s+de\s+solteira(?:\s+da\s+minha\s+m[ãa]e)?|resposta\s+(?:secreta|de\s+seguran[çc]a)",  # pt
        r"resposta\s+[àa]\s+pergunta\s+(?:de\s+seguran[çc]a|secreta)",
        r"cognome\s+da\s+nubile(?:\s+di\s+mia\s+madre)?|risposta\s+(?:segreta|di\s+sicurezza)",  # it
        r"risposta\s+alla\s+domanda\s+(?:di\s+sicurezza|segreta)",
        r"母の旧姓|旧姓|秘密の質問の答え|秘密の質問",  # ja
    )),
    ("answer", "answer", (r"answer|r[ée]ponse|antwort|respuesta|resposta|risposta|答え",)),  # after a question
    ("phrase", "seed_phrase", (
        r"seed\s+phrase|recovery\s+phrase|mnemonic(?:\s+phrase)?|\d+[\s\-]word\s+(?:seed|phrase)|seed\s+words",
        r"シードフレーズ",
    )),
    ("phrase", "passphrase", (
        r"pass\s?phrase|phrase\s+(?:secr[èe]te|de\s+passe)|passsatz",  # en, fr, de
        r"frase\s+(?:de\s+contrase[ñn]a|secreta)|frase[\s\-](?:senha|de\s+acesso)|frase\s+segreta",  # es, pt, it
        r"パスフレーズ",  # ja
    )),
    ("aws", "aws_secret_key", (
        r"aws\s+secret(?:\s+access)?(?:\s+key)?|secret\s+access\s+key|secret\s+key",
        r"cl[ée]\s+(?:d['’]acc[èe]s\s+)?secr[èe]te|geheimer\s+schl[üu]ssel|clave\s+secreta|chave\s+secreta",
        r"chiave\s+segreta|シークレット(?:アクセス)?キー",
    )),
    ("long", "private_key", (
        r"private\s+key|cl[ée]\s+priv[ée]e|privater\s+schl[üu]ssel|clave\s+privada|chave\s+privada",
        r"chiave\s+privata|秘密鍵",
    )),
    ("list", "recovery_code", (
        r"(?:recovery|backup)\s+codes?|codes?\s+de\s+(?:r[ée]cup[ée]ration|secours)",
        r"(?:wiederherstellungs|backup-?)codes?",
        r"c[óo]digos?\s+de\s+(?:recuperaci[óo]n|recupera[çc][ãa]o|respaldo)|codici?\s+di\s+(?:recupero|backup)",
        r"(?:リカバリー|バックアップ)コード",
        r"(?:recovery|backup)\s+keys?|cl[ée]\s+de\s+r[ée]cup[ée]ration|wiederherstellungsschl[üu]ssel",
        r"clave\s+de\s+recuperaci[óo]n|chave\s+de\s+recupera[çc][ãa]o|chiave\s+di\s+recupero|(?:回復|リカバリー)キー",
    )),
    ("otp", "otp", (
        r"one[\s\-]time\s+(?:code|password|passcode|pin)|otp(?:\s+code)?|(?:2fa|mfa|totp|sms|login)\s+code",
        r"(?:verification|confirmation|authenti(?:cation|cator))\s+code",
        r"code\s+(?:de\s+(?:v[ée]rification|confirmation)|[àa]\s+usage\s+unique)",
        r"(?:best[äa]tigungs|verifizierungs|einmal)code|einmalpasswort",
        r"c[óo]digo\s+de\s+(?:verificaci[óo]n|confirmaci[óo]n|verifica[çc][ãa]o|confirma[çc][ãa]o)",
        r"codice\s+(?:di\s+(?:verifica|conferma)|otp)",
        r"ワンタイムパスワード|認証コード|確認コード",
    )),
    ("code", "cvv", (
        r"cvv2?|cvc2?|cid|csc|card\s+security\s+code|card\s+verification\s+(?:value|code)|(?:3|three|4|four)[\s\-]digit\s+(?:security\s+)?code",
        r"(?:security\s+)?code\s+on\s+the\s+back|cryptogramme(?:\s+visuel)?|(?:karten)?pr[üu]fnummer",
        r"c[óo]digo\s+(?:de\s+seguran?[çc]?a|de\s+seguridad|cvv)|codice\s+(?:di\s+sicurezza|cvv)|セキュリティコード",
    )),
    ("login", "password", (
        r"login|credentials|creds|identifiants|zugangsdaten|credenciales|credenciais|credenziali|ログイン情報",
    )),
    ("id", "national_id", (
        r"national\s+insurance\s+(?:number|no\.?)|ni\s+number|national\s+id(?:\s+number)?|id\s+number",
        r"identity\s+(?:card\s+)?number|passport\s+(?:number|no\.?)|driver['’]?s\s+licen[cs]e\s+(?:number|no\.?)",
        r"tax\s+id(?:\s+number)?",
        r"num[ée]ro\s+de\s+(?:s[ée]curit[ée]\s+sociale|s[ée]cu|passeport|carte\s+d['’]identit[ée])|num[ée]ro\s+fiscal",
        r"steuer-?id|steueridentifikationsnummer|(?:personal)?ausweisnummer|sozialversicherungsnummer",
        r"reisepassnummer",
        r"(?-i:DNI|NIE|NIF|CPF)|n[úu]mero\s+de\s+(?:pasaporte|la\s+seguridad\s+social)",
        r"n[úu]mero\s+(?:de\s+identifica[çc][ãa]o\s+fiscal|do\s+passaporte)|cart[ãa]o\s+de\s+cidad[ãa]o",
        r"codice\s+fiscale|numero\s+di\s+passaporto|carta\s+d['’]identit[àa]",
        r"マイナンバー|個人番号|パスポート番号|運転免許証番号",
    )),
    ("code", "pin", (
        r"pin[\s\-]?(?:code|number|nummer|番号)|puk(?:[\s\-]?code)?|codes?\s+pin|c[óo]digos?\s+pin|codic[ei]\s+pin|pin|pass[\s\-]?code",
        r"geheim(?:zahl|nummer|code)|n[úu]mero\s+secreto|numero\s+segreto|secret\s+code|code\s+secret|code\s+confidentiel",
        r"c[óo]digo\s+secreto|codice\s+segreto|c[óo]digo\s+secreto",
        r"暗証番号|パスコード|pinコード",
    )),
    ("code", "door_code", (r"key[\s\-]?code|keypad\s+code|door\s+pin|gate\s+pin",)),
    ("code", "access_code", (
        r"access\s+code|code\s+d['’]acc[èe]s|zugangscode|c[óo]digo\s+de\s+acce?s[os]o?|codice\s+d['’]accesso",
        r"アクセスコード",
    )),
    ("word", "pass", (r"pass",)),  # only beside a Wi-Fi or a login: "SSID Casa, pass X", "user bob pass X"
    ("word", "password", (
        r"pass(?:word|wd)|pass\s?key|pwd|pw",  # en
        r"mot\s+de\s+passe|mdp",  # fr
        r"passwort|kennwort",  # de
        r"contrase[ñn]a|clave(?:\s+de\s+acceso)?",  # es
        r"senha|palavra[\s\-]passe",  # pt
        r"parola\s+d['’]ordine",  # it
        r"パスワード",  # ja
    )),
    ("key", "key", (r"network\s+key|key|cl[ée]f?|schl[üu]ssel|chave|chiave|キー",)),
    ("code", "code", (
        r"digicode|combination|combo|code|combinaison|(?:zahlen)?kombination|(?:zahlen|ziffern|nummern)code|nummer",
        r"c[óo]digo|combinaci[óo]n|combina[çc][ãa]o|codice|combinazione|解除コード|番号|コード",
    )),
)

# --- things: (kind, words by language) ---------------------------------------------------------
# What a secret opens; the first thing said names the kind of a PIN, key or code (and makes a
# password a Wi-Fi password).

THINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wifi_password", (r"wi[\s\-\u2010\u2011]?fi|wlan|wireless|wpa[23]?|guest\s+network|network|r[ée]seau|ssid",)),
    ("alarm_code", (r"alarm(?:anlage)?|alarme|alarma|allarme|antifurto|security\s+system|警報|アラーム",)),
    ("safe_combination", (
        r"safe|coffre(?:[\s\-]fort)?|tresor|caja\s+fuerte|caixa[\s\-]forte|cofre(?:[\s\-]forte)?|cassaforte|金庫",
    )),
    ("locker_code", (
        r"(?:bike\s+)?lock(?:er)?|padlock|casier|cadenas|vestiaire|spind|schlie[ßs]fach|(?:fahrrad)?schloss",
        r"taquilla|candado|cacifo|cadeado|armadietto|lucchetto|ロッカー|南京錠|(?:自転車の)?鍵",
    )),
    ("door_code", (
        r"(?:front\s+|back\s+|main\s+|building\s+|garage\s+)?door|gate|entrance|entry|building|keypad|intercom",
        r"buzzer|lockbox|key\s?safe|garage",  # en
        r"digicode|porte|portail|immeuble|entr[ée]e|interphone",  # fr
        r"(?:haus)?t[üu]r|(?:garagen)?tor|eingang",  # de
        r"puerta|port[aó]n|portal|entrada|edificio|garaje",  # es
        r"port[ãa]o|porta|pr[ée]dio|garagem",  # pt
        r"portone|cancello|ingresso|citofono",  # it
        r"玄関|ドア|オートロック|門",  # ja
    )),
    ("pin", (
        r"(?:bank\s+|debit\s+|credit\s+|sim\s+|ec-?)?card|carte(?:\s+bleue)?|karte|tarjeta|cart[ãa]o|carta",
        r"bancomat|phone|handy|sim|キャッシュカード|カード",
    )),
)
# fmt: on

# --- what a value is not -------------------------------------------------------------------

# Words that, after "the password is", describe a secret instead of giving it (any language).
NOT_A_VALUE = frozenset(
    """
    yes oui ja sí sim sì
    a an the my your his her its our their this that these those it one same different another
    not no none never still now also just only too very so quite really always already again
    is was be been being are were will would should must can could may might has have had
    in on at to for of from with by as into inside under behind there here where what which who
    wrong incorrect correct right required needed necessary missing invalid valid expired weak
    strong long short simple complex easy hard obvious secure insecure safe unsafe secret private
    empty blank unknown known forgotten lost new old default temporary mandatory optional
    case sensitive protected locked unlocked written shared working broken fine good bad ok okay
    something nothing anything everything mine yours ours theirs set reset changed stored saved
    hidden encrypted hashed visible shown displayed sent used enabled disabled generated random
    unique identical similar like about around over below above more less than printed
    great terrible awful horrible fake real trivial guessable memorable common personal
    sûr sûre fort forte faible simple facile difficile long longue court courte vieux vieille
    bon bonne mauvais mauvaise valide invalide obligatoire temporaire requis perdu personnel
    complexe différent différente même nul nulle
    sicher stark schwach kurz lang einfach leicht schwer gut schlecht korrekt gültig
    persönlich anders dasselbe derselbe
    segura seguro fuerte débil corta corto larga largo fácil difícil válida válido inválida
    obligatoria nueva vieja temporal secreta personal misma mismo diferente buena mala correcta
    forte fraca curta longa simples difícil obrigatória velha temporária pessoal mesma boa má
    sicura debole lunga semplice facile difficile obbligatoria vecchia temporanea segreta
    personale stessa diversa buona cattiva scaduta
    le la les un une des du de mon ma mes ton ta son sa notre votre leur ce cette est était sera
    pas dans sur sous chez avec sans pour faux fausse incorrect incorrecte bon bonne trop nouveau
    der die das ein eine mein meine dein sein ihr unser ist war wird nicht im auf unter bei mit
    ohne für falsch richtig zu neu alt geheim gleich
    el los las uno mi tu su nuestro es era será no en sobre bajo con sin para incorrecta
    incorrecto correcta correcto nueva nuevo igual muy
    o os as um uma meu minha seu sua é era será não em no na sobre com sem errada errado
    correta certo nova novo igual muito
    il lo gli una mio mia tuo tua suo è era sarà non nel nella sul sulla con senza per
    sbagliata sbagliato giusta giusto nuova nuovo uguale molto
    """.split()
)

# Forms of a word that describe (participles, adjectives, adverbs), not a made-up password:
# "abgelaufen", "bloqué", "bloccata", "expired", "usable".
DESCRIBING = (
    r"(?:ab|an|auf|aus|ein|mit|nach|vor|zu|zurück|weg|ver|be|er|ent)?ge\w+(?:t|en)|\w+(?:iert|lich|ig|bar|los)"
    r"|\w+(?:é|ée|és|ées|ant|ible|able|eux|euse|ment|ado|ada|ido|ida|ível|mente|oso|osa|ato|ata|ito|ita|bile)"
    r"|\w+(?:ed|ing|ly|ous|ful|less|ive)"
)

# Words a sentence has and a passphrase of plain words seldom does.
FUNCTION_WORDS = frozenset(
    """
    a an the in on at to for of from with by as is was be are and or but not it this that my
    your his her our their into than then so very too also just no
    le la les un une des du de et ou mais est pour dans sur avec pas ce mon ma
    der die das ein eine und oder aber ist für mit nicht im auf zu
    el los las y pero es por con en mi su
    os as um uma e mas é com em no na do da meu minha
    il lo gli ed ma è per con nel nella di del mio mia
    """.split()
)

# A number followed by one of these is a size, a time or a price, not a code.
UNITS = (
    r"digits?|characters?|chars?|letters?|numbers?|symbols?|times?|minutes?|mins?|seconds?|secs?|hours?"
    r"|days?|weeks?|months?|years?|attempts?|tries|people|pages?|lines?|percent|%|euros?|dollars?|€|\$"
    r"|chiffres?|caract[èe]res?|lettres?|jours?|ans|fois|zeichen|stellen|ziffern|buchstaben|tage|jahre"
    r"|mal|caracteres?|d[íi]gitos?|letras?|d[íi]as|a[ñn]os|veces|vezes|cifre|caratteri|lettere|giorni"
    r"|anni|volte|文字|桁|回|円|日|年"
)

ARTICLES = (
    r"my|the|our|your|his|her|their|mon|ma|mes|le|la|l['’]|notre|votre|mein|meine|meinen|das|der|die"
    r"|unser|unsere|mi|el|nuestra|nuestro|a|o|minha|meu|nossa|nosso|il|lo|mia|mio|nostra|nostro"
)

# Little words that may follow a label before its value's verb ("the code *for the* door is").
PREPOSITIONS = (
    r"for|of|to|on|at|in|from|pour|de|du|des|à|sur|für|fürs|vom|von|der|des|meiner|meines|meinem|unserer|im|am"
    r"|beim|zum|zur|del|de la"
    r"|para|en|do|da|dos|das|no|na|della|dello|dell['’]|di|per|sul|sulla|nel|nella"
)

# Verbs and marks between a label and its value ("is", "lautet", "c'est", ":", "は").
VERBS = (
    r"is|was|will\s+be|should\s+be|has\s+been|are|were|est|c['’]est|était|sera|ist|lautet|war|hei[ßs]t"
    r"|es|era|será|é|è|sarà|="
)

# How a change of secret is said before its new value ("was reset to", "a été changé en").
CHANGED = (
    r"(?:been[ \t]+)?(?:changed|reset|set|updated|switched|rotated)[ \t]+(?:to|into)"
    r"|(?:été[ \t]+)?(?:changée?|modifiée?|remplacée?)[ \t]+(?:en|pour|par)|(?:cambiad[oa]|actualizad[oa])[ \t]+a"
    r"|(?:alterad[oa]|mudad[oa])[ \t]+para|(?:stat[oa][ \t]+)?(?:cambiat[oa]|modificat[oa])[ \t]+in"
)

# A security question asked before a bare "answer:" makes the answer a secret.
QUESTIONS = (
    r"(?:security|secret)\s+question|question\s+(?:secr[èe]te|de\s+s[ée]curit[ée])|sicherheitsfrage"
    r"|pregunta\s+(?:de\s+seguridad|secreta)|pergunta\s+(?:de\s+seguran[çc]a|secreta)"
    r"|domanda\s+(?:di\s+sicurezza|segreta)|秘密の質問"
)

# Words that may follow a label before its verb: "la contraseña nueva es ...".
AFTER_LABEL = (
    r"new|current|temporary|temp|old|nouveau|nouvelle|actuel|actuelle|provisoire|ancien|ancienne|neue|neues"
    r"|aktuelle|alte|nueva|nuevo|actual|temporal|antigua|nova|novo|atual|provis[óo]ria|antiga|nuova|nuovo"
    r"|attuale|provvisoria|vecchia"
)

# A question the user answers about themselves: a bare "Answer: X" after it is a secret.
PERSONAL_QUESTION = r"\b(?:your|my|ton|ta|tes|votre|dein|deine|ihr|ihre|tu|su|seu|sua|tuo|tua)\b[^?\n]{0,60}\?"

# Heads whose value may be a plain word ("my password is swordfish"); after another head a
# plain word is taken for talk ("la clave es practicar", "the pw is fine").
PLAIN_WORD_HEADS = (
    r"pass(?:word|wd)|mot\s+de\s+passe|passwort|kennwort|contrase[ñn]a|senha|palavra[\s\-]passe"
    r"|parola\s+d['’]ordine|パスワード"
)
