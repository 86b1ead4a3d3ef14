"""What the users and the assistant of bench/recall_dataset.py say, in English, Russian and
Ukrainian: data only, the generator draws from these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any


@dataclass(frozen=True)
class Phrases:
    """Everything one language says. Templates take the fields of
    `bench.recall_dataset.values()`."""

    greetings: tuple[str, ...]  # open a session
    connectors: tuple[str, ...]  # open any later message
    asks: tuple[str, ...]
    acks: tuple[str, ...]
    followups: tuple[str, ...]
    thanks: tuple[str, ...]
    welcome: tuple[str, ...]
    chatter: tuple[tuple[str, str], ...]  # (user statement, assistant advice)
    fact_replies: tuple[str, ...]  # never repeat the value: evidence stays the user's turn
    topic_replies: tuple[str, ...]
    facts: dict[str, dict[str, tuple[str, ...]]]  # kind -> plant/update/ask/key/before
    topics: tuple[dict[str, Any], ...]  # intro, who, about, details
    temporal_questions: tuple[str, ...]
    when_recent: tuple[str, ...]
    when_this_week: str
    when_last_week: str
    when_old: tuple[str, ...]
    when_month: str
    months_date: tuple[str, ...]  # "14 March", "14 марта"
    months_in: tuple[str, ...]  # "back in January", "ещё в январе"
    sisters: tuple[str, ...]
    cities: tuple[tuple[str, str], ...]  # (name, "in <name>" as the language says it)
    destinations: tuple[str, ...]  # "to Porto", "в Сочи", "до Варшави"
    companies: tuple[str, ...]
    animals: tuple[tuple[str, str], ...]  # (as object, as subject)
    pets: tuple[str, ...]
    allergens: tuple[str, ...]

    def day(self, d: date) -> str:
        return f"{d.day} {self.months_date[d.month - 1]}"


# Russian and Ukrainian user lines avoid the first-person past tense, which is gendered.

PASSWORD_WORDS = ("blue", "heron", "amber", "fox", "cedar", "otter", "maple", "comet", "lynx",
                  "coral", "finch", "river")
PROJECT_CODES = ("Bluefin", "Kestrel", "Marigold", "Quartz", "Tundra", "Lantern", "Saffron")

EN = Phrases(
    greetings=("Hi!", "Hey!", "Hello again.", "Hi, it's me again."),
    connectors=("", "", "", "", "Okay.", "Right.", "Another thing.", "One more thing."),
    asks=("", "Any tips?", "What would you do?", "Is that normal?", "Thoughts?"),
    acks=("", "I hear you.", "Makes sense.", "Good question.", "Fair enough."),
    followups=("", "", "Want me to sketch a plan?", "Let me know how it goes.",
               "Happy to go into more detail."),
    thanks=("Thanks, that helps.", "Good idea, I'll try that.", "Makes sense, thank you!",
            "Ha, fair point."),
    welcome=("You're welcome!", "Glad it helps.", "Anytime.", "Good luck with it!"),
    chatter=(
        ("I'm trying to cook more at home, but weeknights are chaotic.",
         "Batch-cooking a base like rice or roasted vegetables on Sunday makes weeknights easier."),
        ("The office wifi kept dropping during calls today.",
         "That's frustrating. A cable or a seat closer to the access point often helps."),
        ("I want to read more this year, maybe one book a month.",
         "One a month is realistic. Keeping a book by the bed helps more than people expect."),
        ("My neighbour's dog barks every morning at six.",
         "A friendly word with the neighbour usually goes further than a complaint."),
        ("Flight prices for the summer already look crazy.",
         "Fares often dip midweek; a price alert is worth setting up."),
        ("I've been sleeping badly since the clocks changed.",
         "Waking at the same time every day, weekends too, helps reset the rhythm."),
        ("My sister keeps sending me recipes she never cooks herself.",
         "Ha, maybe cook one of them together on a video call?"),
        ("Work has been a lot this week, the team is short-staffed.",
         "That sounds draining. Is there anything you can push to next week?"),
        ("I started running again, just twice a week for now.",
         "Twice a week is a great start; add distance slowly to avoid injury."),
        ("I need a birthday gift for a friend who has everything.",
         "Experiences work well for people like that: a class, a concert, a nice dinner."),
        ("Our team switched to a new task tracker and nobody likes it.",
         "New tools always feel slower at first; give it a couple of weeks before judging."),
        ("The pollen this spring is making my eyes itch.",
         "An antihistamine in the morning and closed windows in the afternoon can help."),
    ),
    fact_replies=("Got it, I'll keep that in mind.", "Thanks, noted.", "Good to know!",
                  "Okay, noted for later.", "Thanks for telling me, that's useful context."),
    topic_replies=("Thanks for the update. Do you want a reminder for the follow-up?",
                   "Good that you went. Shall I note the next steps?",
                   "Okay. Let me know if you want to plan around it."),
    facts={
        "sister": {
            "plant": ("My sister {sis} lives {in1}.",
                      "{sis}, my sister, has been living {in1} for years now."),
            "update": ("{sis} has moved! She lives {in2} now.",
                       "Update on my sister: she has finally settled {in2}."),
            "ask": ("Which city is {sis} based in?", "Where would I travel to visit my sibling?"),
            "key": ("Where does my sister live?",),
            "before": ("Where did {sis} live before she moved?",
                       "Which city was my sister in before {city2}?"),
        },
        "flight": {
            "plant": ("My flight {to} is on {date1}.", "Booked it: I fly {to} on {date1}."),
            "update": ("The airline moved my flight {to}, it's now on {date2}.",
                       "Change of plans: the trip {to} is now on {date2}."),
            "ask": ("When do I leave {to}?", "What day am I heading {to}?"),
            "key": ("When is my flight {to}?",),
            "before": ("What was the original date of my flight {to}?",
                       "When was the trip {to} planned before it was rescheduled?"),
        },
        "employer": {
            "plant": ("I work at {co1}, mostly on the data side.",
                      "My employer is {co1}, a mid-sized company."),
            "update": ("Big change: I accepted an offer and started at {co2} this week.",
                       "New job! I'm at {co2} now."),
            "ask": ("Which company pays my salary?", "Whose office do I commute to every day?"),
            "key": ("Who is my employer?",),
            "before": ("Where did I work before {co2}?", "What was my previous company?"),
        },
        "wifi": {
            "plant": ("Note to self: the wifi password at the cabin is {pw}.",
                      "Before I forget, the cabin wifi password is {pw}."),
            "ask": ("What's the network key for our weekend place in the woods?",
                    "How do I get my laptop online up at the lodge?"),
            "key": ("What is the wifi password at the cabin?",),
        },
        "pet": {
            "plant": ("We adopted a {animal} last weekend and called it {name}.",
                      "Big news: we got a {animal_n}! The little one is called {name}."),
            "ask": ("What's the name of our new pet?", "What did we call the animal we adopted?"),
            "key": ("What is our {animal_n}'s name?",),
        },
        "allergy": {
            "plant": ("Just so you know, I'm allergic to {allergen}.",
                      "The doctor confirmed it: I have an allergy to {allergen}."),
            "ask": ("What should I avoid because my body reacts badly to it?",
                    "Which substance gives me a bad reaction?"),
            "key": ("What am I allergic to?",),
        },
        "codename": {
            "plant": ("At work our new project got a codename: {code}.",
                      "The project I'm leading is called {code} internally."),
            "ask": ("What's the secret name of the effort I'm leading at work?",
                    "What do we call my current work initiative behind closed doors?"),
            "key": ("What is the codename of my project?",),
        },
    },
    topics=(
        {"intro": "I was at the dentist today.", "who": "the dentist", "about": "the dentist",
         "details": ("They said I need a crown on a back tooth.",
                     "They said my gums look much healthier.",
                     "They said a wisdom tooth has to come out.",
                     "They told me to switch to a softer toothbrush.")},
        {"intro": "Picked the car up from the garage today.", "who": "the mechanic",
         "about": "the car",
         "details": ("The mechanic said the brake pads are almost worn through.",
                     "They found a small leak in the radiator.",
                     "The timing belt needs replacing soon.",
                     "Nothing serious, just a loose heat shield.")},
        {"intro": "Had my physio session this morning.", "who": "the physio", "about": "physio",
         "details": ("They want me to do knee exercises every day.",
                     "My shoulder is healing faster than expected.",
                     "I have to stop running for two weeks.",
                     "They suggested a standing desk for my back.")},
    ),
    temporal_questions=("What did {who} tell me {when}?", "What did I say about {about} {when}?"),
    when_recent=("a few days ago", "the other day"),
    when_this_week="earlier this week",
    when_last_week="last week",
    when_old=("a few weeks ago", "the first time I brought it up"),
    when_month="back in {month}",
    months_date=("January", "February", "March", "April", "May", "June", "July", "August",
                 "September", "October", "November", "December"),
    months_in=("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"),
    sisters=("Olena", "Maya", "Clara", "Ines", "Hannah", "Priya"),
    cities=(("Lviv", "in Lviv"), ("Kyiv", "in Kyiv"), ("Leeds", "in Leeds"), ("Lyon", "in Lyon"),
            ("Denver", "in Denver"), ("Toronto", "in Toronto")),
    destinations=("to Porto", "to Oslo", "to Athens", "to Lisbon", "to Dublin"),
    companies=("Northwind Logistics", "Brightline Health", "Copperleaf Games", "Halden Robotics",
               "Mistral Foods"),
    animals=(("puppy", "puppy"), ("kitten", "kitten")),
    pets=("Biscuit", "Pixel", "Mango", "Juniper", "Pepper"),
    allergens=("penicillin", "peanuts", "shellfish", "latex", "sesame"),
)

RU = Phrases(
    greetings=("Привет!", "Здравствуй!", "Снова привет.", "Привет, это снова я."),
    connectors=("", "", "", "", "Ладно.", "Так.", "И ещё.", "Ещё одно."),
    asks=("", "Что посоветуешь?", "Как думаешь, это нормально?", "Есть идеи?"),
    acks=("", "Понимаю.", "Хороший вопрос.", "Бывает."),
    followups=("", "", "Хотите, составлю план?", "Расскажите потом, как получится.",
               "Если нужно, могу подробнее."),
    thanks=("Спасибо, это помогает.", "Хорошая идея, попробую.", "Понятно, спасибо!"),
    welcome=("Всегда пожалуйста.", "Обращайтесь!", "Удачи!"),
    chatter=(
        ("Хочу чаще готовить дома, но по будням совсем нет времени.",
         "Попробуйте в воскресенье готовить основу на несколько дней: рис, запечённые овощи."),
        ("В офисе весь день отваливался вайфай прямо во время созвонов.",
         "Неприятно. Часто помогает кабель или место поближе к роутеру."),
        ("Хочу в этом году больше читать, хотя бы книгу в месяц.",
         "Книга в месяц — реальная цель. Держите книгу у кровати, это правда работает."),
        ("Соседская собака лает каждое утро в шесть.",
         "Спокойный разговор с соседями обычно помогает больше, чем жалоба."),
        ("Цены на летние перелёты уже какие-то безумные.",
         "Обычно билеты дешевле в середине недели; стоит включить уведомления о ценах."),
        ("После перевода часов совсем плохо сплю.",
         "Помогает вставать в одно и то же время каждый день, даже в выходные."),
        ("Сестра постоянно присылает рецепты, которые сама никогда не готовит.",
         "Ха, может, приготовить что-нибудь вместе по видеосвязи?"),
        ("На работе завал, в команде не хватает людей.",
         "Звучит выматывающе. Можно что-то перенести на следующую неделю?"),
        ("Снова начинаю бегать, пока два раза в неделю.",
         "Отличное начало; увеличивайте дистанцию постепенно, чтобы не травмироваться."),
        ("Нужна идея подарка для друга, у которого всё есть.",
         "Таким людям хорошо дарить впечатления: мастер-класс, концерт, ужин."),
        ("Команда перешла на новый таск-трекер, и он никому не нравится.",
         "Новые инструменты поначалу всегда кажутся медленнее; дайте ему пару недель."),
        ("Этой весной от пыльцы чешутся глаза.",
         "Антигистаминное утром и закрытые окна днём обычно помогают."),
    ),
    fact_replies=("Понятно, запомню.", "Спасибо, принято.", "Хорошо, учту.",
                  "Ясно, буду иметь в виду."),
    topic_replies=("Спасибо, что рассказали. Напомнить про следующий визит?",
                   "Хорошо, что всё выяснилось. Записать дальнейшие шаги?",
                   "Понятно. Если нужно что-то спланировать, скажите."),
    facts={
        "sister": {
            "plant": ("Моя сестра {sis} живёт {in1}.",
                      "{sis}, моя сестра, уже много лет живёт {in1}."),
            "update": ("{sis} переехала! Теперь она живёт {in2}.",
                       "Новости про сестру: она наконец обустроилась {in2}."),
            "ask": ("В каком городе сейчас {sis}?", "Куда мне ехать в гости к сестре?"),
            "key": ("Где живёт моя сестра?",),
            "before": ("Где {sis} жила до переезда?",
                       "В каком городе жила сестра, пока не оказалась {in2}?"),
        },
        "flight": {
            "plant": ("Мой рейс {to} — {date1}.", "Билеты куплены: лечу {to} {date1}."),
            "update": ("Авиакомпания перенесла мой рейс {to}, теперь он {date2}.",
                       "Планы поменялись: поездка {to} теперь {date2}."),
            "ask": ("Когда я улетаю {to}?", "Какого числа у меня поездка {to}?"),
            "key": ("Когда мой рейс {to}?",),
            "before": ("На какое число изначально был рейс {to}?",
                       "Какая дата была у рейса {to} до переноса?"),
        },
        "employer": {
            "plant": ("Я работаю в компании {co1}, в основном с данными.",
                      "Мой работодатель — {co1}, компания среднего размера."),
            "update": ("Большие перемены: с этой недели я в компании {co2}.",
                       "Новая работа! Теперь я в компании {co2}."),
            "ask": ("Какая компания платит мне зарплату?", "В чей офис я езжу каждый день?"),
            "key": ("Кто мой работодатель?",),
            "before": ("Где была моя работа до компании {co2}?",
                       "Какое у меня было прошлое место работы?"),
        },
        "wifi": {
            "plant": ("Чтобы не забыть: пароль от вайфая на даче — {pw}.",
                      "Запиши: на даче пароль от Wi-Fi {pw}."),
            "ask": ("Какой ключ сети у нас за городом?",
                    "Как подключить ноутбук к интернету, когда мы за городом?"),
            "key": ("Какой пароль от вайфая на даче?",),
        },
        "pet": {
            "plant": ("На выходных мы взяли {animal}, его зовут {name}.",
                      "Новость: у нас теперь {animal_n} по имени {name}!"),
            "ask": ("Как зовут нашего нового питомца?",
                    "Какое имя мы дали животному, которое взяли?"),
            "key": ("Как зовут нашего {animal}?",),
        },
        "allergy": {
            "plant": ("На всякий случай: у меня аллергия на {allergen}.",
                      "Врач подтвердил: у меня аллергия на {allergen}."),
            "ask": ("Чего мне нужно избегать, потому что организм плохо реагирует?",
                    "На что у меня бывает плохая реакция?"),
            "key": ("На что у меня аллергия?",),
        },
        "codename": {
            "plant": ("На работе у нашего нового проекта появилось кодовое имя: {code}.",
                      "Проект, которым я руковожу, внутри называется {code}."),
            "ask": ("Как внутри компании называют то, чем я сейчас занимаюсь на работе?",
                    "Какое секретное название у моей рабочей инициативы?"),
            "key": ("Какое кодовое название у моего проекта?",),
        },
    },
    topics=(
        {"intro": "Сегодня был приём у стоматолога.", "who": "стоматолог",
         "about": "со стоматологом",
         "details": ("Сказали, что нужна коронка на дальний зуб.",
                     "Сказали, что дёсны стали заметно здоровее.",
                     "Сказали, что зуб мудрости придётся удалить.",
                     "Посоветовали перейти на мягкую щётку.")},
        {"intro": "Сегодня забрали машину из сервиса.", "who": "механик", "about": "с машиной",
         "details": ("Механик сказал, что тормозные колодки почти стёрлись.",
                     "Нашли небольшую течь в радиаторе.", "Скоро нужно менять ремень ГРМ.",
                     "Ничего серьёзного, просто болтался теплозащитный экран.")},
        {"intro": "Утром было занятие с физиотерапевтом.", "who": "физиотерапевт",
         "about": "с физиотерапевтом",
         "details": ("Велели каждый день делать упражнения для колена.",
                     "Плечо заживает быстрее, чем ожидалось.", "Сказали две недели не бегать.",
                     "Посоветовали стоячий стол для спины.")},
    ),
    temporal_questions=("Что мне сказал {who} {when}?", "Что там было {about} {when}?"),
    when_recent=("несколько дней назад", "на днях"),
    when_this_week="на этой неделе",
    when_last_week="на прошлой неделе",
    when_old=("несколько недель назад", "в самый первый раз"),
    when_month="ещё в {month}",
    months_date=("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа",
                 "сентября", "октября", "ноября", "декабря"),
    months_in=("январе", "феврале", "марте", "апреле", "мае", "июне", "июле", "августе",
               "сентябре", "октябре", "ноябре", "декабре"),
    sisters=("Оля", "Маша", "Катя", "Лена", "Наташа"),
    cities=(("Казань", "в Казани"), ("Тверь", "в Твери"), ("Самара", "в Самаре"),
            ("Пермь", "в Перми"), ("Новосибирск", "в Новосибирске"),
            ("Екатеринбург", "в Екатеринбурге")),
    destinations=("в Сочи", "в Стамбул", "в Ереван", "в Тбилиси", "в Калининград"),
    companies=("«Альтаир»", "«Вектор-Софт»", "«Полярис»", "«Гелиос»", "«Тайга Лаб»"),
    animals=(("щенка", "щенок"), ("котёнка", "котёнок")),
    pets=("Бублик", "Пиксель", "Манго", "Кнопка", "Перчик"),
    allergens=("пенициллин", "арахис", "морепродукты", "латекс", "кунжут"),
)

UK = Phrases(
    greetings=("Привіт!", "Вітаю!", "Знову привіт.", "Привіт, це знову я."),
    connectors=("", "", "", "", "Гаразд.", "Так.", "І ще.", "Ще одне."),
    asks=("", "Що порадиш?", "Як думаєш, це нормально?", "Є ідеї?"),
    acks=("", "Розумію.", "Гарне питання.", "Буває."),
    followups=("", "", "Хочете, складу план?", "Розкажіть потім, як вийде.",
               "Якщо треба, можу детальніше."),
    thanks=("Дякую, це допомагає.", "Гарна ідея, спробую.", "Зрозуміло, дякую!"),
    welcome=("Завжди будь ласка.", "Звертайтеся!", "Успіхів!"),
    chatter=(
        ("Хочу частіше готувати вдома, але в будні зовсім немає часу.",
         "Спробуйте в неділю готувати основу на кілька днів: рис, запечені овочі."),
        ("В офісі весь день відвалювався вайфай просто під час дзвінків.",
         "Прикро. Часто допомагає кабель або місце ближче до роутера."),
        ("Хочу цього року більше читати, хоча б книжку на місяць.",
         "Книжка на місяць — реальна мета. Тримайте книжку біля ліжка, це справді працює."),
        ("Сусідський пес гавкає щоранку о шостій.",
         "Спокійна розмова з сусідами зазвичай допомагає більше, ніж скарга."),
        ("Ціни на літні перельоти вже якісь шалені.",
         "Зазвичай квитки дешевші посеред тижня; варто ввімкнути сповіщення про ціни."),
        ("Після переведення годинника зовсім погано сплю.",
         "Допомагає прокидатися в один і той самий час щодня, навіть у вихідні."),
        ("Сестра постійно надсилає рецепти, які сама ніколи не готує.",
         "Ха, може, приготувати щось разом по відеозв'язку?"),
        ("На роботі завал, у команді бракує людей.",
         "Звучить виснажливо. Можна щось перенести на наступний тиждень?"),
        ("Знову починаю бігати, поки що двічі на тиждень.",
         "Чудовий початок; збільшуйте дистанцію поступово, щоб не травмуватися."),
        ("Потрібна ідея подарунка для друга, який має все.",
         "Таким людям добре дарувати враження: майстер-клас, концерт, вечерю."),
        ("Команда перейшла на новий таск-трекер, і він нікому не подобається.",
         "Нові інструменти спочатку завжди здаються повільнішими; дайте йому кілька тижнів."),
        ("Цієї весни від пилку сверблять очі.",
         "Антигістамінне зранку й зачинені вікна вдень зазвичай допомагають."),
    ),
    fact_replies=("Зрозуміло, запам'ятаю.", "Дякую, прийнято.", "Добре, врахую.",
                  "Ясно, матиму на увазі."),
    topic_replies=("Дякую, що розповіли. Нагадати про наступний візит?",
                   "Добре, що все з'ясувалося. Записати подальші кроки?",
                   "Зрозуміло. Якщо треба щось спланувати, скажіть."),
    facts={
        "sister": {
            "plant": ("Моя сестра {sis} живе {in1}.",
                      "{sis}, моя сестра, вже багато років живе {in1}."),
            "update": ("{sis} переїхала! Тепер вона живе {in2}.",
                       "Новини про сестру: вона нарешті облаштувалася {in2}."),
            "ask": ("У якому місті зараз {sis}?", "Куди мені їхати в гості до сестри?"),
            "key": ("Де живе моя сестра?",),
            "before": ("Де {sis} жила до переїзду?",
                       "У якому місті жила сестра, поки не опинилася {in2}?"),
        },
        "flight": {
            "plant": ("Мій рейс {to} — {date1}.", "Квитки куплено: лечу {to} {date1}."),
            "update": ("Авіакомпанія перенесла мій рейс {to}, тепер він {date2}.",
                       "Плани змінилися: поїздка {to} тепер {date2}."),
            "ask": ("Коли я вилітаю {to}?", "Якого числа в мене поїздка {to}?"),
            "key": ("Коли мій рейс {to}?",),
            "before": ("На яке число спочатку був рейс {to}?",
                       "Яка дата була в рейсу {to} до перенесення?"),
        },
        "employer": {
            "plant": ("Я працюю в компанії {co1}, переважно з даними.",
                      "Мій роботодавець — {co1}, компанія середнього розміру."),
            "update": ("Великі зміни: з цього тижня я в компанії {co2}.",
                       "Нова робота! Тепер я в компанії {co2}."),
            "ask": ("Яка компанія платить мені зарплату?", "До чийого офісу я їжджу щодня?"),
            "key": ("Хто мій роботодавець?",),
            "before": ("Де була моя робота до компанії {co2}?",
                       "Яке в мене було попереднє місце роботи?"),
        },
        "wifi": {
            "plant": ("Щоб не забути: пароль від вайфаю на дачі — {pw}.",
                      "Запиши: на дачі пароль від Wi-Fi {pw}."),
            "ask": ("Який ключ мережі в нас за містом?",
                    "Як під'єднати ноутбук до інтернету, коли ми за містом?"),
            "key": ("Який пароль від вайфаю на дачі?",),
        },
        "pet": {
            "plant": ("На вихідних ми взяли {animal}, його звати {name}.",
                      "Новина: у нас тепер {animal_n} на ім'я {name}!"),
            "ask": ("Як звати нашого нового улюбленця?", "Яке ім'я ми дали тваринці, яку взяли?"),
            "key": ("Як звати наше {animal_n}?",),
        },
        "allergy": {
            "plant": ("Про всяк випадок: у мене алергія на {allergen}.",
                      "Лікар підтвердив: у мене алергія на {allergen}."),
            "ask": ("Чого мені треба уникати, бо організм погано реагує?",
                    "На що в мене буває погана реакція?"),
            "key": ("На що в мене алергія?",),
        },
        "codename": {
            "plant": ("На роботі наш новий проєкт отримав кодове ім'я: {code}.",
                      "Проєкт, яким я керую, всередині називається {code}."),
            "ask": ("Як усередині компанії називають те, чим я зараз займаюся на роботі?",
                    "Яка секретна назва в моєї робочої ініціативи?"),
            "key": ("Яка кодова назва мого проєкту?",),
        },
    },
    topics=(
        {"intro": "Сьогодні був прийом у стоматолога.", "who": "стоматолог",
         "about": "зі стоматологом",
         "details": ("Сказали, що потрібна коронка на дальній зуб.",
                     "Сказали, що ясна стали помітно здоровішими.",
                     "Сказали, що зуб мудрості доведеться видалити.",
                     "Порадили перейти на м'яку щітку.")},
        {"intro": "Сьогодні забрали машину із сервісу.", "who": "механік", "about": "з машиною",
         "details": ("Механік сказав, що гальмівні колодки майже стерлися.",
                     "Знайшли невеликий витік у радіаторі.", "Скоро треба міняти ремінь ГРМ.",
                     "Нічого серйозного, просто бовтався теплозахисний екран.")},
        {"intro": "Зранку було заняття з фізіотерапевтом.", "who": "фізіотерапевт",
         "about": "з фізіотерапевтом",
         "details": ("Сказали щодня робити вправи для коліна.",
                     "Плече загоюється швидше, ніж очікували.", "Сказали два тижні не бігати.",
                     "Порадили стоячий стіл для спини.")},
    ),
    temporal_questions=("Що мені сказав {who} {when}?", "Що там було {about} {when}?"),
    when_recent=("кілька днів тому", "днями"),
    when_this_week="цього тижня",
    when_last_week="минулого тижня",
    when_old=("кілька тижнів тому", "найпершого разу"),
    when_month="ще в {month}",
    months_date=("січня", "лютого", "березня", "квітня", "травня", "червня", "липня", "серпня",
                 "вересня", "жовтня", "листопада", "грудня"),
    months_in=("січні", "лютому", "березні", "квітні", "травні", "червні", "липні", "серпні",
               "вересні", "жовтні", "листопаді", "грудні"),
    sisters=("Оксана", "Марічка", "Ірина", "Олена", "Соломія"),
    cities=(("Львів", "у Львові"), ("Київ", "у Києві"), ("Одеса", "в Одесі"),
            ("Харків", "у Харкові"), ("Дніпро", "у Дніпрі"), ("Вінниця", "у Вінниці")),
    destinations=("до Варшави", "до Праги", "до Відня", "до Лісабона", "до Риму"),
    companies=("«Смарагд»", "«Карпати Дата»", "«Ліра»", "«Оріон»", "«Вежа Софт»"),
    animals=(("цуценя", "цуценя"), ("кошеня", "кошеня")),
    pets=("Бублик", "Піксель", "Манго", "Ґудзик", "Перчик"),
    allergens=("пеніцилін", "арахіс", "морепродукти", "латекс", "кунжут"),
)

LANGS = {"en": EN, "ru": RU, "uk": UK}
